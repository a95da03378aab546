// Placeholder entry point until the launcher lands (issue 2, item 5).
#include <cstdio>
int main() {
  std::fprintf(stderr, "hbrun: the launcher is not built yet\n");
  return 2;
}
