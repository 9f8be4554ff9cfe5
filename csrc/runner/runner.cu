// replayssm_runner: launches one replayssm kernel by name, in a loop, on device buffers filled with
// random data, without Python or torch, so that ncu / nsys see just that kernel.
//
//   replayssm_runner <kernel> [--batch N] [--slots N] [--hist-capacity B] [--max-tokens T]
//                    [--ring-len R] [--iters N] [--warmup N] [--seed N]
//   replayssm_runner --list
//
// Each kernel is one entry of kKernels: a name, a line of help and a setup function that allocates
// and fills its buffers and hands back the launch to repeat. Adding a kernel = adding one entry.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "replayssm/common/cursor.h"
#include "replayssm/common/params.h"
#include "replayssm/launch.h"

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "replayssm_runner: %s\n", msg.c_str());
  std::exit(1);
}

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(err));
}

// One cudaMalloc'ed buffer, freed when the runner exits.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    check_cuda(cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

struct Options {
  int64_t batch = 256;
  int64_t slots = -1;  // default: batch
  int32_t hist_capacity = 16;
  int32_t max_tokens = 1;
  int32_t ring_len = -1;  // default: hist_capacity + max_tokens
  int iters = 1000;
  int warmup = 10;
  uint64_t seed = 0;
};

// What a kernel's setup hands back: the launch to repeat, the bytes one launch moves (counted
// analytically, for the bandwidth line), and a check run once after the loop.
struct Workload {
  std::function<const char*(cudaStream_t)> launch;
  double bytes_per_launch = 0;
  std::function<void()> check_after = [] {};
  std::vector<std::shared_ptr<DeviceBuffer>> buffers;  // kept alive for the launches
};

template <typename T>
std::shared_ptr<DeviceBuffer> upload(const std::vector<T>& host) {
  auto buf = std::make_shared<DeviceBuffer>(host.size() * sizeof(T));
  check_cuda(cudaMemcpy(buf->data(), host.data(), buf->bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  return buf;
}

template <typename T>
std::vector<T> download(const DeviceBuffer& buf) {
  std::vector<T> host(buf.bytes() / sizeof(T));
  check_cuda(cudaMemcpy(host.data(), buf.data(), buf.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  return host;
}

// ---- commit ------------------------------------------------------------------------------------
// Cursors start from a reachable state (reset, then a random number of random commits, with the
// same rules the kernel applies), rows map to distinct random slots, a few rows are padding.
Workload setup_commit(const Options& o, std::mt19937_64& rng) {
  const int32_t B = o.hist_capacity, T = o.max_tokens, R = o.ring_len;
  std::vector<int32_t> hist(o.slots), start(o.slots);
  std::vector<int8_t> flush(o.slots);
  std::uniform_int_distribution<int32_t> accepted_dist(1, T), steps_dist(0, 3 * B);
  for (int64_t s = 0; s < o.slots; ++s) {
    replayssm::Cursor c = replayssm::reset_cursor(B, T);
    for (int32_t k = steps_dist(rng); k > 0; --k) c = replayssm::commit_cursor(c, accepted_dist(rng), B, T, R);
    hist[s] = c.hist;
    start[s] = c.start;
    flush[s] = c.flush;
  }
  std::vector<int32_t> slot_ids(o.slots);
  std::iota(slot_ids.begin(), slot_ids.end(), 0);
  std::shuffle(slot_ids.begin(), slot_ids.end(), rng);
  std::vector<int32_t> row_slots(o.batch), accepted(o.batch);
  for (int64_t r = 0; r < o.batch; ++r) {
    row_slots[r] = (r % 16 == 15) ? replayssm::kPadSlot : slot_ids[r];  // every 16th row is padding
    accepted[r] = accepted_dist(rng);
  }

  Workload w;
  auto d_slots = upload(row_slots), d_accepted = upload(accepted);
  auto d_hist = upload(hist), d_start = upload(start);
  auto d_flush = upload(flush);
  w.buffers = {d_slots, d_accepted, d_hist, d_start, d_flush};

  replayssm::CommitParams p{};
  p.slots = d_slots->as<int32_t>();
  p.accepted = d_accepted->as<int32_t>();
  p.cursor = {d_hist->as<int32_t>(), d_start->as<int32_t>(), d_flush->as<int8_t>()};
  p.batch = static_cast<int32_t>(o.batch);
  p.num_slots = o.slots;
  p.hist_capacity = B;
  p.max_tokens = T;
  p.ring_len = R;
  p.null_slot = replayssm::kNoNullSlot;
  w.launch = [p](cudaStream_t stream) { return replayssm::launch_commit(p, stream); };
  // Per row: slot and accepted read; hist, start, flush read and written.
  w.bytes_per_launch = static_cast<double>(o.batch) * (4 + 4 + 2 * (4 + 4 + 1));
  // Commits keep cursors in range whatever the count: check that they still are.
  w.check_after = [d_hist, d_start, d_flush, B, T, R] {
    const auto h = download<int32_t>(*d_hist), st = download<int32_t>(*d_start);
    const auto f = download<int8_t>(*d_flush);
    for (size_t s = 0; s < h.size(); ++s) {
      if (h[s] < 0 || h[s] > B || st[s] < 0 || st[s] >= R || f[s] != replayssm::flush_due(h[s], B, T))
        die("commit left slot " + std::to_string(s) + " with hist=" + std::to_string(h[s]) +
            " start=" + std::to_string(st[s]) + " flush=" + std::to_string(f[s]) + " (B=" + std::to_string(B) +
            ", T=" + std::to_string(T) + ", R=" + std::to_string(R) + ")");
    }
  };
  return w;
}

struct KernelEntry {
  const char* name;
  const char* help;
  Workload (*setup)(const Options&, std::mt19937_64&);
};

// name -> setup. New launchers from launch.h get one line here.
constexpr KernelEntry kKernels[] = {
    {"commit", "cursor commit, one thread per row (launch_commit)", setup_commit},
};

void print_usage() {
  std::printf(
      "usage: replayssm_runner <kernel> [--batch N] [--slots N] [--hist-capacity B] [--max-tokens T]\n"
      "                        [--ring-len R] [--iters N] [--warmup N] [--seed N]\n"
      "kernels:\n");
  for (const auto& k : kKernels) std::printf("  %-12s %s\n", k.name, k.help);
}

int64_t parse_int(const char* flag, const char* text) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0') die(std::string(flag) + " expects an integer, got '" + text + "'");
  return v;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) die("option " + flag + " needs a value");
    const int64_t v = parse_int(argv[i], argv[i + 1]);
    ++i;
    if (flag == "--batch") o.batch = v;
    else if (flag == "--slots") o.slots = v;
    else if (flag == "--hist-capacity") o.hist_capacity = static_cast<int32_t>(v);
    else if (flag == "--max-tokens") o.max_tokens = static_cast<int32_t>(v);
    else if (flag == "--ring-len") o.ring_len = static_cast<int32_t>(v);
    else if (flag == "--iters") o.iters = static_cast<int>(v);
    else if (flag == "--warmup") o.warmup = static_cast<int>(v);
    else if (flag == "--seed") o.seed = static_cast<uint64_t>(v);
    else die("unknown option " + flag);
  }
  if (o.slots < 0) o.slots = o.batch;
  if (o.ring_len < 0) o.ring_len = o.hist_capacity + o.max_tokens;
  if (o.batch < 1) die("--batch must be >= 1, got " + std::to_string(o.batch));
  if (o.slots < o.batch) die("--slots must be >= --batch (rows use distinct slots), got slots=" +
                             std::to_string(o.slots) + ", batch=" + std::to_string(o.batch));
  if (o.max_tokens < 1) die("--max-tokens must be >= 1, got " + std::to_string(o.max_tokens));
  if (o.hist_capacity < o.max_tokens)
    die("--hist-capacity must be >= --max-tokens, got B=" + std::to_string(o.hist_capacity) +
        ", T=" + std::to_string(o.max_tokens));
  if (o.ring_len < o.hist_capacity + o.max_tokens)
    die("--ring-len must be >= hist_capacity + max_tokens = " + std::to_string(o.hist_capacity + o.max_tokens) +
        ", got " + std::to_string(o.ring_len));
  if (o.iters < 1 || o.warmup < 0) die("--iters must be >= 1 and --warmup >= 0");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--list") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? 1 : 0;
  }
  const KernelEntry* entry = nullptr;
  for (const auto& k : kKernels)
    if (!std::strcmp(k.name, argv[1])) entry = &k;
  if (entry == nullptr) {
    print_usage();
    die(std::string("unknown kernel '") + argv[1] + "'");
  }
  const Options o = parse_options(argc, argv);

  std::mt19937_64 rng(o.seed);
  Workload w = entry->setup(o, rng);
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  auto launch_checked = [&] {
    if (const char* err = w.launch(stream)) die(std::string(entry->name) + " launch failed: " + err);
  };
  for (int i = 0; i < o.warmup; ++i) launch_checked();
  check_cuda(cudaStreamSynchronize(stream), "warm-up");

  cudaEvent_t t0, t1;
  check_cuda(cudaEventCreate(&t0), "cudaEventCreate");
  check_cuda(cudaEventCreate(&t1), "cudaEventCreate");
  check_cuda(cudaEventRecord(t0, stream), "cudaEventRecord");
  for (int i = 0; i < o.iters; ++i) launch_checked();
  check_cuda(cudaEventRecord(t1, stream), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(t1), "timed loop");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
  w.check_after();

  const double us_per_launch = 1e3 * ms / o.iters;
  std::printf("%s: batch=%lld slots=%lld B=%d T=%d R=%d iters=%d: %.3f us/launch (launch overhead included), "
              "%.1f GB/s counted\n",
              entry->name, static_cast<long long>(o.batch), static_cast<long long>(o.slots), o.hist_capacity,
              o.max_tokens, o.ring_len, o.iters, us_per_launch, w.bytes_per_launch / (us_per_launch * 1e3));
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaStreamDestroy(stream);
  return 0;
}
