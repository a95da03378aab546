#include "rendezvous/frame.h"
#include <gtest/gtest.h>
TEST(Frame, Placeholder) {}
