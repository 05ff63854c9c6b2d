// hnswlib-serve: hnswlib's own multi-threaded search of an hnswlib file,
// the baseline of safe/hnsw's BenchmarkServe (internal/hnswlibbench).
//
// It loads the file hnsw.Index.Serialize writes (hnswlib's saveIndex
// format) with the system's hnswlib headers (Debian's libhnswlib-dev,
// header-only), searches every query alone from N threads (one query per
// searchKnn, as the Go benchmark's goroutines do: no batching), and prints
// queries per second, the CPUs kept busy, recall against the exact kNN and
// agreement with the ids another program (the Go search) wrote.
//
//   hnswlib-serve -index FILE -queries FILE [-metric l2|ip] [-k 10]
//                 [-ef 64] [-threads 1,8,16,32] [-seconds 5]
//                 [-exact] [-compare FILE] [-out FILE]
//
// Files: queries are "fbin" (uint32 n, uint32 dim, n*dim float32, little
// endian); -compare reads and -out writes "i64bin" (uint32 n, uint32 k,
// n*k int64 ids, nearest first). -out holds this program's serial pass
// (every query once, one thread). float32 vectors only.
//
// A base-layer-only file (cuVS's HierarchyNone, cagra's
// SerializeToHnswlib: its entry point lacks the max level) is searched as
// cuVS's patched hnswlib does (base_layer_only): from the nearest of 32
// evenly spaced elements, then hnswlib's base-layer search; stock hnswlib
// would descend through upper layers the file does not have.
//
// Every line of output is "hnswlib" then key=value fields; errors go to
// stderr with exit status 1 (2 for bad usage).
#include <hnswlib/hnswlib.h>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void die(int code, const std::string& msg)
{
  std::fprintf(stderr, "hnswlib-serve: %s\n", msg.c_str());
  std::exit(code);
}

struct Matrix {
  uint32_t rows = 0, cols = 0;
  std::vector<char> data;  // rows * cols elements
};

Matrix read_bin(const std::string& path, size_t elem)
{
  std::ifstream in(path, std::ios::binary);
  if (!in) die(1, "cannot open " + path);
  Matrix m;
  in.read(reinterpret_cast<char*>(&m.rows), 4);
  in.read(reinterpret_cast<char*>(&m.cols), 4);
  if (!in || m.rows == 0 || m.cols == 0) die(1, path + ": no header of two nonzero uint32");
  size_t bytes = size_t(m.rows) * m.cols * elem;
  m.data.resize(bytes);
  in.read(m.data.data(), std::streamsize(bytes));
  if (!in) die(1, path + ": shorter than its header says");
  in.peek();
  if (!in.eof()) die(1, path + ": bytes after its data");
  return m;
}

void write_ids(const std::string& path, uint32_t n, uint32_t k, const std::vector<int64_t>& ids)
{
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 4);
  out.write(reinterpret_cast<const char*>(&k), 4);
  out.write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * 8));
  if (!out) die(1, "cannot write " + path);
}

// The header fields hnswlib's saveIndex writes first that the program
// needs before loadIndex: the vector's byte size gives the dimension.
uint64_t file_dim(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in) die(1, "cannot open " + path);
  uint64_t h[6];
  in.read(reinterpret_cast<char*>(h), sizeof h);
  if (!in) die(1, path + ": shorter than hnswlib's header");
  uint64_t label_offset = h[4], offset_data = h[5];
  if (label_offset <= offset_data || (label_offset - offset_data) % 4 != 0)
    die(1, path + ": vectors are not a whole number of float32 (not a float32 hnswlib index)");
  return (label_offset - offset_data) / 4;
}

std::vector<int> parse_list(const std::string& s)
{
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 4096) die(2, "bad thread count \"" + item + "\"");
    out.push_back(int(v));
  }
  if (out.empty()) die(2, "no thread count");
  return out;
}

double cpu_seconds()
{
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

using Index = hnswlib::HierarchicalNSW<float>;

// One query's k nearest, nearest first: hnswlib's searchKnn, or cuVS's
// base_layer_only search (hnswlib.diff in cuVS: the nearest of num_seeds =
// 32 elements i * (max_elements_ / 32), then searchBaseLayerST).
void knn(const Index& h, bool base_only, const float* q, size_t k, int64_t* ids, float* dists)
{
  std::priority_queue<std::pair<float, hnswlib::labeltype>> res;
  if (!base_only) {
    res = h.searchKnn(q, k);
  } else {
    hnswlib::tableint cur = h.enterpoint_node_;
    float curd = h.fstdistfunc_(q, h.getDataByInternalId(cur), h.dist_func_param_);
    const size_t seeds = 32;
    for (size_t i = 0; i < seeds; i++) {
      hnswlib::tableint obj = hnswlib::tableint(i * (h.max_elements_ / seeds));
      float d = h.fstdistfunc_(q, h.getDataByInternalId(obj), h.dist_func_param_);
      if (d < curd) {
        curd = d;
        cur = obj;
      }
    }
    auto top = h.searchBaseLayerST<false, true>(cur, q, std::max(h.ef_, k));
    while (top.size() > k) top.pop();
    while (!top.empty()) {
      res.emplace(top.top().first, h.getExternalLabel(top.top().second));
      top.pop();
    }
  }
  for (size_t j = k; j-- > 0;) {
    if (res.empty()) {  // fewer than k reachable: the Go side's sentinel
      ids[j] = INT64_MAX;
      dists[j] = INFINITY;
      continue;
    }
    ids[j] = int64_t(res.top().second);
    dists[j] = res.top().first;
    res.pop();
  }
}

// recall of got (n x k) against want (n x k): the share of want's ids found
// in got's row.
double overlap(const std::vector<int64_t>& got, const std::vector<int64_t>& want, size_t n, size_t k)
{
  size_t hit = 0;
  for (size_t i = 0; i < n; i++) {
    for (size_t a = 0; a < k; a++) {
      for (size_t b = 0; b < k; b++) {
        if (want[i * k + a] == got[i * k + b]) {
          hit++;
          break;
        }
      }
    }
  }
  return double(hit) / double(n * k);
}

}  // namespace

int main(int argc, char** argv)
{
  std::string index_path, queries_path, metric = "l2", compare_path, out_path, threads_s = "1,8,16,32";
  size_t k = 10, ef = 64;
  double seconds = 5;
  bool exact = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) die(2, a + " needs a value");
      return argv[++i];
    };
    if (a == "-index") index_path = val();
    else if (a == "-queries") queries_path = val();
    else if (a == "-metric") metric = val();
    else if (a == "-k") k = std::strtoul(val().c_str(), nullptr, 10);
    else if (a == "-ef") ef = std::strtoul(val().c_str(), nullptr, 10);
    else if (a == "-threads") threads_s = val();
    else if (a == "-seconds") seconds = std::strtod(val().c_str(), nullptr);
    else if (a == "-exact") exact = true;
    else if (a == "-compare") compare_path = val();
    else if (a == "-out") out_path = val();
    else die(2, "unknown flag " + a + " (see the comment at the top of serve.cpp)");
  }
  if (index_path.empty() || queries_path.empty()) die(2, "-index and -queries are needed");
  if (k < 1 || ef < 1 || !(seconds >= 0)) die(2, "-k and -ef must be at least 1, -seconds not negative");
  if (metric != "l2" && metric != "ip") die(2, "-metric " + metric + ", want l2 or ip");
  std::vector<int> thread_counts = parse_list(threads_s);

  size_t dim = file_dim(index_path);
  Matrix qs = read_bin(queries_path, 4);
  if (qs.cols != dim) die(1, "queries of dimension " + std::to_string(qs.cols) + ", the index has " + std::to_string(dim));
  hnswlib::L2Space l2(dim);
  hnswlib::InnerProductSpace ip(dim);
  hnswlib::SpaceInterface<float>* space = metric == "ip" ? static_cast<hnswlib::SpaceInterface<float>*>(&ip) : &l2;
  Index* h = nullptr;
  try {
    h = new Index(space, index_path);
  } catch (const std::exception& e) {
    die(1, index_path + ": " + e.what());
  }
  size_t n = h->cur_element_count;
  if (k > n) die(1, "k " + std::to_string(k) + " exceeds the index's " + std::to_string(n) + " rows");
  bool base_only = n > 0 && h->element_levels_[h->enterpoint_node_] < h->maxlevel_;
  h->setEf(ef);
  std::printf("hnswlib index=%s rows=%zu dim=%zu M=%zu maxM0=%zu maxlevel=%d base_layer_only=%d metric=%s\n", index_path.c_str(), n, dim,
              h->M_, h->maxM0_, h->maxlevel_, int(base_only), metric.c_str());
  size_t nq = qs.rows;
  const float* q = reinterpret_cast<const float*>(qs.data.data());
  std::printf("hnswlib queries=%zu k=%zu ef=%zu\n", nq, k, ef);

  // serial pass: every query once
  std::vector<int64_t> ids(nq * k);
  std::vector<float> dists(nq * k);
  for (size_t i = 0; i < nq; i++) knn(*h, base_only, q + i * dim, k, &ids[i * k], &dists[i * k]);
  if (!out_path.empty()) write_ids(out_path, uint32_t(nq), uint32_t(k), ids);

  std::vector<int64_t> other;
  if (!compare_path.empty()) {
    Matrix c = read_bin(compare_path, 8);
    if (c.rows != nq || c.cols != k)
      die(1, compare_path + ": " + std::to_string(c.rows) + " x " + std::to_string(c.cols) + " ids, want " + std::to_string(nq) + " x " +
               std::to_string(k));
    other.resize(nq * k);
    std::memcpy(other.data(), c.data.data(), other.size() * 8);
    size_t same = 0;
    for (size_t i = 0; i < nq; i++) same += std::equal(&ids[i * k], &ids[i * k] + k, &other[i * k]);
    std::printf("hnswlib agree@%zu=%.4f identical_rows=%zu/%zu compare=%s\n", k, overlap(ids, other, nq, k), same, nq, compare_path.c_str());
  }

  if (exact) {
    // the exact kNN by labels, over every element, on all cores
    std::vector<int64_t> truth(nq * k);
    unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < hw; t++) {
      ts.emplace_back([&, t]() {
        std::vector<std::pair<float, int64_t>> all(n);
        for (size_t i = t; i < nq; i += hw) {
          for (size_t e = 0; e < n; e++) {
            all[e] = {h->fstdistfunc_(q + i * dim, h->getDataByInternalId(hnswlib::tableint(e)), h->dist_func_param_),
                      int64_t(h->getExternalLabel(hnswlib::tableint(e)))};
          }
          std::partial_sort(all.begin(), all.begin() + long(k), all.end());
          for (size_t j = 0; j < k; j++) truth[i * k + j] = all[j].second;
        }
      });
    }
    for (auto& t : ts) t.join();
    std::printf("hnswlib recall@%zu=%.4f (exact kNN, %zu queries)\n", k, overlap(ids, truth, nq, k), nq);
    if (!other.empty()) std::printf("hnswlib compare_recall@%zu=%.4f (%s against the exact kNN)\n", k, overlap(other, truth, nq, k), compare_path.c_str());
  }

  // timed passes: T threads, each searching one query at a time, taking the
  // next query from a shared counter, until the deadline
  for (int T : thread_counts) {
    std::atomic<uint64_t> next{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    auto start = std::chrono::steady_clock::now();
    double cpu0 = cpu_seconds();
    auto deadline = start + std::chrono::duration<double>(seconds);
    for (int t = 0; t < T; t++) {
      ts.emplace_back([&]() {
        std::vector<int64_t> id(k);
        std::vector<float> d(k);
        for (;;) {
          uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
          if ((i & 15) == 0 && std::chrono::steady_clock::now() >= deadline) stop.store(true, std::memory_order_relaxed);
          if (stop.load(std::memory_order_relaxed)) return;
          knn(*h, base_only, q + (i % nq) * dim, k, id.data(), d.data());
        }
      });
    }
    for (auto& t : ts) t.join();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double cpus = (cpu_seconds() - cpu0) / wall;
    // the searches that ran: every index handed out, less one per thread
    // (the one that found stop set)
    uint64_t done = next.load() - uint64_t(T);
    std::printf("hnswlib threads=%d searches=%llu seconds=%.3f qps=%.1f cpus=%.2f\n", T, (unsigned long long)done, wall, double(done) / wall, cpus);
  }
  delete h;
  return 0;
}
