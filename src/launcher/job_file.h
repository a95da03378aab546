// The job file of a running `hbrun --ps` job: how a later `hbrun --join`
// finds the job's ps tasks and takes the next free worker rank. The job
// (the ps tasks) is the meeting point, as torchrun's rendezvous backend is
// for its agents; the file only says where it is and hands out ranks.
#pragma once

#include <string>
#include <vector>

namespace hb {
namespace launcher {

// What the file says. Written by the job's hbrun at each start (ps tasks on
// new ports after a whole-job restart), updated under a lock by joiners.
struct JobInfo {
  long pid = 0;              // the job's hbrun
  std::string ps_hosts;      // HB_PS_HOSTS of the job's processes
  int world = 0;             // the workers the job started with
  int next_rank = 0;         // the rank the next joiner gets
  std::vector<long> joined;  // joiners' hbrun pids (the job waits for them)
};

// $HB_JOB_DIR, else $TMPDIR, else /tmp.
std::string job_dir();

// The file of `job`: a job id (the job's hbrun pid: <job_dir>/hbrun-<id>.job)
// or a path to the file.
std::string job_file_path(const std::string &job);

// The job's hbrun: (re)writes `path` for a start of the job; next_rank
// starts at info.world again (new ps tasks know only the started world).
// Throws hb::Error(HB_ERR_IO).
void write_job_file(const std::string &path, const JobInfo &info);

// A joiner: takes `count` ranks (the first is returned in info->next_rank)
// and records joiner_pid, under the file's lock. Throws hb::Error: the file
// is missing or malformed, or its hbrun is gone (HB_ERR_CONFIG, naming the
// job and the file).
JobInfo join_job(const std::string &job, int count, long joiner_pid);

// Reads the file (the joiner's restarts re-read the ps tasks' addresses).
// Throws as join_job.
JobInfo read_job_file(const std::string &job);

// The job's hbrun: whether a joiner recorded in `path` still runs.
bool joiners_running(const std::string &path);

// Whether process pid exists.
bool process_alive(long pid);

}  // namespace launcher
}  // namespace hb
