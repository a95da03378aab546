// main() for the GPU tests built against the GoogleTest stand-in.
#include <gtest/gtest.h>

int main() { return hb_mini_run_all() == 0 ? 0 : 1; }
