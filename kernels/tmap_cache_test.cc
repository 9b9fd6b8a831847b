// The tensor-map cache (tmap_cache.h), on the host with a stand-in encoder whose output is
// a function of its inputs: a repeated key is copied, not encoded again, and the copy is
// byte-for-byte what the encoder made; any field of the key that differs encodes anew; a
// failed encode is not remembered; more keys than entries still give every key its own
// map; a 128-group batch's 384 maps are encoded once over five batches; clear() forgets.
#include "kernels/tmap_cache.h"

#include <cstdio>
#include <cstdlib>

#include "kernels/testutil.h"

namespace {

int g_encodes = 0;

// A stand-in map: 128 bytes derived from every field of the key.
void fake_map(const gemmd::TmapKey &k, unsigned char *out) {
  uint64_t s = k.addr ^ (uint64_t(k.form) << 7) ^ (uint64_t(k.cols) << 13) ^ (uint64_t(k.ld) << 23) ^
               (uint64_t(k.rows) << 31) ^ (uint64_t(k.box_cols) << 41) ^ (uint64_t(k.box_rows) << 53);
  for (int i = 0; i < 128; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = (unsigned char)(s >> 56);
  }
}

bool get(gemmd::TmapCache &c, const gemmd::TmapKey &k, unsigned char *out, bool fail = false) {
  return c.get(k, out, [&](void *dst) {
    g_encodes++;
    if (fail) return false;
    fake_map(k, static_cast<unsigned char *>(dst));
    return true;
  });
}

void expect_map(const gemmd::TmapKey &k, const unsigned char *got, const char *what) {
  unsigned char want[128];
  fake_map(k, want);
  TEST_CHECK(std::memcmp(got, want, 128) == 0, "%s: the map differs from the encoder's", what);
}

}  // namespace

int main() {
  test_rng_t rng = {test_seed("tmap_cache_test")};
  gemmd::TmapCache cache;
  unsigned char out[128];
  const gemmd::TmapKey base = {0x7f0000001000ull, 0, 7168, 7168, 4096, 128, 128};

  TEST_CHECK(get(cache, base, out) && g_encodes == 1, "first use encodes");
  expect_map(base, out, "first use");
  std::memset(out, 0, sizeof out);
  TEST_CHECK(get(cache, base, out) && g_encodes == 1, "second use is a copy (encodes %d)", g_encodes);
  expect_map(base, out, "copy");
  TEST_CHECK(cache.hits() == 1 && cache.misses() == 1, "hits %llu misses %llu", (unsigned long long)cache.hits(),
             (unsigned long long)cache.misses());

  // Every field is part of the key.
  for (int field = 0; field < 7; field++) {
    gemmd::TmapKey k = base;
    switch (field) {
      case 0: k.addr += 256; break;
      case 1: k.form = 1; break;
      case 2: k.cols += 128; break;
      case 3: k.ld += 16; break;
      case 4: k.rows -= 1; break;
      case 5: k.box_cols = 64; break;
      default: k.box_rows = 64; break;
    }
    const int before = g_encodes;
    TEST_CHECK(get(cache, k, out) && g_encodes == before + 1, "field %d changed: encoded anew", field);
    expect_map(k, out, "changed field");
  }

  // A failed encode is reported and not remembered.
  gemmd::TmapKey bad = base;
  bad.addr = 0x1234;
  TEST_CHECK(!get(cache, bad, out, true), "a failing encoder fails the get");
  TEST_CHECK(get(cache, bad, out) && g_encodes == 10, "after a failure the key encodes again (%d)", g_encodes);
  expect_map(bad, out, "after a failure");

  // Many more keys than entries, revisited in random order: always the key's own map.
  std::vector<gemmd::TmapKey> keys;
  for (int i = 0; i < 6 * (int)gemmd::TmapCache::kSets; i++) {
    keys.push_back({0x7f0000000000ull + 256ull * test_range(&rng, 0, 1u << 20), test_range(&rng, 0, 1),
                    128u * test_range(&rng, 1, 64), 16u * test_range(&rng, 8, 600), test_range(&rng, 1, 8192), 128,
                    16u << test_range(&rng, 0, 3)});
  }
  for (int i = 0; i < 40000; i++) {
    const gemmd::TmapKey &k = keys[test_range(&rng, 0, (uint32_t)keys.size() - 1)];
    TEST_CHECK(get(cache, k, out), "get");
    expect_map(k, out, "random keys");
  }
  TEST_CHECK(cache.hits() > 1000, "a working set larger than the cache still hits sometimes (%llu)",
             (unsigned long long)cache.hits());

  // A working set that fits is encoded once per key.
  gemmd::TmapCache small;
  const int before = g_encodes;
  for (int pass = 0; pass < 5; pass++) {
    for (int i = 0; i < 384; i++) {  // a 128-group batch: three maps per group
      gemmd::TmapKey k = base;
      k.addr += 4096ull * i;
      TEST_CHECK(get(small, k, out), "get");
      expect_map(k, out, "batch");
    }
  }
  // (three of the 384 keys may share a two-way set, rarely: then those three each pass)
  TEST_CHECK(g_encodes - before <= 384 + 4 * 3, "384 keys, 5 passes: %d encodes", g_encodes - before);

  small.clear();
  const int after_clear = g_encodes;
  TEST_CHECK(get(small, base, out) && g_encodes == after_clear + 1, "clear() forgets");
  std::printf("tmap_cache_test: ok (%llu hits, %llu misses in the random pass)\n", (unsigned long long)cache.hits(),
              (unsigned long long)cache.misses());
  return 0;
}
