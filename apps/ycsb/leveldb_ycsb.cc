// YCSB-style workloads A-F on LevelDB, checking every value read.
//
//   leveldb_ycsb DB_DIR [records] [operations] [workloads, e.g. ABCDEF]
//
// Keys are "user" + a scrambled index (FNV-64 of the record number, as YCSB). Each record
// has a version; its value is a deterministic function of (key, version), 100 bytes, so
// every read (scans included) can be checked against the version the driver last wrote. Request
// distributions follow YCSB's core workloads: A 50/50 read/update, B 95/5 read/update,
// C read only, D 95/5 read latest/insert, E 95/5 short scan/insert, F 50/50
// read/read-modify-write; zipfian (theta 0.99) except D's "latest". Prints one line per
// workload: operations, seconds, ops/s, and the count of values checked. Exits 1 on the
// first wrong value or LevelDB error.

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

static uint64_t fnv64(uint64_t v) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < 8; i++) {
    h ^= v & 0xff;
    h *= 0x100000001b3ULL;
    v >>= 8;
  }
  return h;
}

static std::string key_of(uint64_t n) {
  char buf[32];
  snprintf(buf, sizeof buf, "user%020llu", (unsigned long long)fnv64(n));
  return buf;
}

static std::string value_of(const std::string& key, uint32_t version) {
  std::string v(100, ' ');
  uint64_t x = fnv64(std::hash<std::string>{}(key) ^ (uint64_t(version) << 32)) | 1;
  for (size_t i = 0; i < v.size(); i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = char('a' + x % 26);
  }
  return v;
}

// YCSB's ZipfianGenerator (Gray et al.), over [0, n).
struct Zipfian {
  uint64_t n;
  double theta = 0.99, alpha, zetan, eta, zeta2;
  static double zeta(uint64_t n, double theta) {
    double s = 0;
    for (uint64_t i = 1; i <= n; i++) s += 1.0 / std::pow(double(i), theta);
    return s;
  }
  explicit Zipfian(uint64_t n_) : n(n_) {
    zetan = zeta(n, theta);
    zeta2 = zeta(2, theta);
    alpha = 1.0 / (1.0 - theta);
    eta = (1 - std::pow(2.0 / n, 1 - theta)) / (1 - zeta2 / zetan);
  }
  uint64_t next(std::mt19937_64& rng) {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    double uz = u * zetan;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, theta)) return 1;
    return uint64_t(n * std::pow(eta * u - eta + 1, alpha)) % n;
  }
};

static void die(const char* what, const std::string& detail) {
  fprintf(stderr, "leveldb_ycsb: %s: %s\n", what, detail.c_str());
  exit(1);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DB_DIR [records] [operations] [workloads]\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  uint64_t records = argc > 2 ? strtoull(argv[2], nullptr, 10) : 10000;
  uint64_t ops = argc > 3 ? strtoull(argv[3], nullptr, 10) : 10000;
  std::string workloads = argc > 4 ? argv[4] : "ABCDEF";

  leveldb::Options opt;
  opt.create_if_missing = true;
  opt.paranoid_checks = true;
  leveldb::DB* raw = nullptr;
  leveldb::Status st = leveldb::DB::Open(opt, dir, &raw);
  if (!st.ok()) die("open", st.ToString());
  std::unique_ptr<leveldb::DB> db(raw);
  leveldb::ReadOptions ro;
  ro.verify_checksums = true;
  leveldb::WriteOptions wo;
  wo.sync = false;

  std::vector<uint32_t> version;  // per record number
  std::unordered_map<std::string, uint64_t> record_of;  // key -> record number (for scans)
  std::mt19937_64 rng(42);
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < records; i++) {
    st = db->Put(wo, key_of(i), value_of(key_of(i), 0));
    if (!st.ok()) die("load", st.ToString());
    version.push_back(0);
    record_of[key_of(i)] = i;
  }
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("load %llu records in %.3f s: %.0f ops/s\n", (unsigned long long)records, load_s, records / load_s);

  uint64_t checked = 0;
  auto check_read = [&](uint64_t n) {
    std::string v;
    std::string k = key_of(n);
    leveldb::Status s = db->Get(ro, k, &v);
    if (!s.ok()) die("read", k + ": " + s.ToString());
    if (v != value_of(k, version[n])) die("wrong value", k);
    checked++;
  };
  auto update = [&](uint64_t n) {
    version[n]++;
    leveldb::Status s = db->Put(wo, key_of(n), value_of(key_of(n), version[n]));
    if (!s.ok()) die("update", s.ToString());
  };
  auto insert = [&]() {
    uint64_t n = version.size();
    version.push_back(0);
    record_of[key_of(n)] = n;
    leveldb::Status s = db->Put(wo, key_of(n), value_of(key_of(n), 0));
    if (!s.ok()) die("insert", s.ToString());
  };

  for (char w : workloads) {
    Zipfian zipf(version.size());
    auto pick = [&]() { return fnv64(zipf.next(rng)) % version.size(); };
    std::uniform_real_distribution<double> coin(0, 1);
    auto t = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < ops; i++) {
      double c = coin(rng);
      switch (w) {
        case 'A': c < 0.5 ? check_read(pick()) : update(pick()); break;
        case 'B': c < 0.95 ? check_read(pick()) : update(pick()); break;
        case 'C': check_read(pick()); break;
        case 'D': {
          if (c < 0.95) {
            // "latest": recent inserts are the most popular.
            uint64_t back = zipf.next(rng) % version.size();
            check_read(version.size() - 1 - back);
          } else {
            insert();
          }
          break;
        }
        case 'E': {
          if (c < 0.95) {
            std::string start = key_of(pick());
            uint64_t len = 1 + rng() % 100;
            std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
            uint64_t got = 0;
            for (it->Seek(start); it->Valid() && got < len; it->Next(), got++) {
              std::string k = it->key().ToString();
              auto r = record_of.find(k);
              if (r == record_of.end()) die("scan: unknown key", k);
              if (it->value().ToString() != value_of(k, version[r->second])) die("scan: wrong value", k);
              checked++;
            }
            if (!it->status().ok()) die("scan", it->status().ToString());
          } else {
            insert();
          }
          break;
        }
        case 'F': {
          uint64_t n = pick();
          check_read(n);
          if (c >= 0.5) update(n);
          break;
        }
        default: die("workload", std::string(1, w));
      }
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    printf("workload %c: %llu ops in %.3f s: %.0f ops/s\n", w, (unsigned long long)ops, s, ops / s);
  }
  // Every record, once more, against its last version.
  for (uint64_t n = 0; n < version.size(); n++) check_read(n);
  printf("checked %llu values, all correct\n", (unsigned long long)checked);
  return 0;
}
