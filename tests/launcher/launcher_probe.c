/* A worker for the launcher tests: reports what hbrun gave it and fails,
 * sleeps or catches signals on request. Usage: launcher_probe MODE args...
 *   env                      print the HB_* variables on one line
 *   lines K                  K lines on stdout, K on stderr, then a partial
 * line wide K W                 K lines of W copies of the rank's last digit
 *   exit-if-rank R CODE S    rank R exits CODE at once; others sleep S s
 *   raise-if-rank R SIG S    rank R raises SIG at once; others sleep S s
 *   sleep S                  print "pid <pid>" and "ready", sleep S s, exit 0
 *   ignore-term S            ignore SIGTERM, print "ready", sleep S s
 *   catch-term               print "ready", wait for SIGTERM/SIGINT, report it
 *   cpus                     print "cpus c0,c1,..." (its affinity mask)
 *   exit-before-restart N R CODE
 *                            print "start rank=.. world=.. restart=..";
 *                            rank R exits CODE while HB_RESTART_COUNT < N
 *                            (0.2 s later, so the others print first)
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v ? v : dflt;
}

static int my_rank(void) { return atoi(env_or("HB_RANK", "-1")); }

static void sleep_seconds(double s) {
  struct timespec ts;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static volatile sig_atomic_t g_caught = 0;
static void on_signal(int sig) { g_caught = sig; }

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* stdout is a pipe: line-buffer it */
  if (argc < 2) {
    fprintf(stderr, "usage: launcher_probe MODE args...\n");
    return 2;
  }
  const char *mode = argv[1];
  int rank = my_rank();
  if (strcmp(mode, "env") == 0) {
    printf(
        "env rank=%s world=%s local_rank=%s local_world=%s rdv=%s served=%s "
        "cuda=%s tf=%s\n",
        env_or("HB_RANK", "unset"), env_or("HB_WORLD_SIZE", "unset"),
        env_or("HB_LOCAL_RANK", "unset"),
        env_or("HB_LOCAL_WORLD_SIZE", "unset"),
        env_or("HB_RENDEZVOUS", "unset"),
        env_or("HB_RENDEZVOUS_SERVED", "unset"),
        env_or("CUDA_VISIBLE_DEVICES", "unset"),
        getenv("TF_CONFIG") ? "set" : "unset");
    return 0;
  }
  if (strcmp(mode, "lines") == 0 && argc == 3) {
    int k = atoi(argv[2]);
    for (int i = 0; i < k; ++i) {
      printf("out %d\n", i);
      fprintf(stderr, "err %d\n", i);
    }
    printf("partial");
    return 0;
  }
  if (strcmp(mode, "wide") == 0 && argc == 4) {
    int k = atoi(argv[2]), w = atoi(argv[3]);
    char *line = malloc((size_t)w + 2);
    memset(line, '0' + (rank < 0 ? 0 : rank % 10), (size_t)w);
    line[w] = '\n';
    line[w + 1] = '\0';
    setvbuf(stdout, NULL, _IOFBF, 1 << 12); /* small blocks: lines get split */
    for (int i = 0; i < k; ++i) fputs(line, stdout);
    free(line);
    return 0;
  }
  if ((strcmp(mode, "exit-if-rank") == 0 ||
       strcmp(mode, "raise-if-rank") == 0) &&
      argc == 5) {
    if (rank == atoi(argv[2])) {
      if (mode[0] == 'e') return atoi(argv[3]);
      raise(atoi(argv[3]));
      return 1;
    }
    sleep_seconds(atof(argv[4]));
    return 0;
  }
  if ((strcmp(mode, "sleep") == 0 || strcmp(mode, "ignore-term") == 0) &&
      argc == 3) {
    if (mode[0] == 'i') signal(SIGTERM, SIG_IGN);
    printf("pid %ld\nready\n", (long)getpid());
    sleep_seconds(atof(argv[2]));
    return 0;
  }
  if (strcmp(mode, "cpus") == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 3;
    printf("cpus");
    const char *sep = " ";
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) {
        printf("%s%d", sep, c);
        sep = ",";
      }
    printf("\n");
    return 0;
  }
  if (strcmp(mode, "exit-before-restart") == 0 && argc == 5) {
    int restart = atoi(env_or("HB_RESTART_COUNT", "0"));
    printf("start rank=%s world=%s restart=%s torch_restart=%s\n",
           env_or("HB_RANK", "unset"), env_or("HB_WORLD_SIZE", "unset"),
           env_or("HB_RESTART_COUNT", "unset"),
           env_or("TORCHELASTIC_RESTART_COUNT", "unset"));
    if (rank == atoi(argv[3]) && restart < atoi(argv[2])) {
      sleep_seconds(0.2);
      return atoi(argv[4]);
    }
    return 0;
  }
  if (strcmp(mode, "catch-term") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("ready\n");
    for (int i = 0; i < 3000 && !g_caught; ++i) sleep_seconds(0.01);
    if (!g_caught) return 9;
    printf("caught %d\n", (int)g_caught);
    return 0;
  }
  fprintf(stderr, "launcher_probe: bad mode or arguments: %s\n", mode);
  return 2;
}
