/* Prints docs/options.md from the library's own option table
 * (hb_option_describe), so the documented options can never drift from
 * the code: the docs_options test diffs this output against the file. */
#include <ctype.h>
#include <hb.h>
#include <stdio.h>

int main(void) {
  printf("# Options\n\n");
  printf("Generated from `hb_option_describe` by `docs/gen_options.c`; do not edit.\n\n");
  printf("Every option can be set per context (`hb_context_options.options` as\n");
  printf("`name=value,...`, or `hb_context_set_option`) and overridden for the\n");
  printf("process by the environment variable `HB_<NAME>`. A malformed value is\n");
  printf("`HB_ERR_CONFIG` naming the option and the value.\n\n");
  printf("| option | environment | type | default | meaning |\n");
  printf("| --- | --- | --- | --- | --- |\n");
  for (size_t i = 0;; ++i) {
    const char *name, *type, *def, *doc;
    if (hb_option_describe(i, &name, &type, &def, &doc) != HB_OK) break;
    char env[128] = "HB_";
    size_t k = 3;
    for (const char *p = name; *p && k + 1 < sizeof env; ++p) env[k++] = (char)toupper((unsigned char)*p);
    env[k] = '\0';
    printf("| `%s` | `%s` | %s | `%s` | %s |\n", name, env, type, def[0] ? def : "(empty)", doc);
  }
  return 0;
}
