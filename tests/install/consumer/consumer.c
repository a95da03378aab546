/* A foreign program linking hb from its installed tree. */
#include <hb.h>
#include <stdio.h>

int main(void) {
  hb_context *ctx = NULL;
  if (hb_version_number() != HB_VERSION_NUMBER) {
    fprintf(stderr, "header/library version mismatch\n");
    return 1;
  }
  hb_status st = hb_context_create(NULL, &ctx);
  if (st != HB_OK) {
    fprintf(stderr, "hb_context_create: %s: %s\n", hb_status_name(st),
            hb_last_error());
    return 1;
  }
  float x[4] = {1, 2, 3, 4};
  st = hb_allreduce(ctx, x, x, 4, HB_FLOAT32, HB_SUM);
  if (st != HB_OK) {
    fprintf(stderr, "hb_allreduce: %s: %s\n", hb_status_name(st),
            hb_last_error());
    return 1;
  }
  printf("consumer ok: world %d, x[3] = %g, %s\n", hb_context_world_size(ctx),
         x[3], hb_build_info());
  hb_context_destroy(ctx);
  return x[3] == 4.0f ? 0 : 1;
}
