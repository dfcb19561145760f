"""cffi build script: the subset of RocksDB's C API (rocksdb/c.h) that LogsDB uses.

Out-of-line API mode: declarations are checked against the real header at build time and
compiled into ``logdevice._rocksdb``.  Declare each function once, here.

Besides the C API itself the module carries a few small C helpers (``ld_*``, in
``SOURCE`` below).  Python pays roughly a microsecond per cffi call, which is more than
RocksDB needs to put or read one small record, so the helpers do the per-record loops in C:

- ``ld_batch_put_many`` puts n records from contiguous buffers + offset arrays into a write
  batch; each value may be two parts (a head and a body) joined without a copy in Python.
- ``ld_batch_delete_many`` deletes n keys the same way.
- ``ld_batch_put_plan`` puts the entries of a put plan (``ldcore.storefmt.encode_run``):
  one buffer of entries, each a key and a value whose tail may be a slice of another
  buffer (a record's payload, which is not copied to build the plan).
- ``ld_iter_read`` copies up to n entries from an iterator into caller-provided buffers.
- ``ld_iter_read_keys`` copies the entries for a sorted list of wanted keys (a merge join:
  ``next`` while close, ``seek`` when far), so a reader can pick a subset of a range.
- ``ld_read_range`` is a whole small read in one call: read options with the bounds, an
  iterator, a seek, ``ld_iter_read``, the error check and freeing it all.  Done in
  Python those are ten cffi calls and a few objects, several times RocksDB's own cost of
  reading a young log's record or two.  When the caller's buffers fill first, the
  iterator stays open in an ``ld_range_t`` of the caller's: ``ld_range_more`` goes on
  once they grew, ``ld_range_free`` gives it up.

Reads can split each value at a head whose length is its first two bytes (little-endian),
so heads (record headers) and bodies (payloads) land in separate contiguous buffers.

    value:  | u16 LE head length H | rest of head ... |<------------ body ------------>|
            0                                        H                               len
"""

from cffi import FFI

CDEF = """
typedef struct rocksdb_t rocksdb_t;
typedef struct rocksdb_options_t rocksdb_options_t;
typedef struct rocksdb_block_based_table_options_t rocksdb_block_based_table_options_t;
typedef struct rocksdb_cache_t rocksdb_cache_t;
typedef struct rocksdb_column_family_handle_t rocksdb_column_family_handle_t;
typedef struct rocksdb_writebatch_t rocksdb_writebatch_t;
typedef struct rocksdb_writeoptions_t rocksdb_writeoptions_t;
typedef struct rocksdb_readoptions_t rocksdb_readoptions_t;
typedef struct rocksdb_flushoptions_t rocksdb_flushoptions_t;
typedef struct rocksdb_iterator_t rocksdb_iterator_t;
typedef struct rocksdb_pinnableslice_t rocksdb_pinnableslice_t;

void rocksdb_free(void* ptr);

/* options */
rocksdb_options_t* rocksdb_options_create(void);
void rocksdb_options_destroy(rocksdb_options_t*);
void rocksdb_options_set_create_if_missing(rocksdb_options_t*, unsigned char);
void rocksdb_options_set_wal_recovery_mode(rocksdb_options_t*, int);
void rocksdb_options_set_create_missing_column_families(rocksdb_options_t*, unsigned char);
void rocksdb_options_set_error_if_exists(rocksdb_options_t*, unsigned char);
void rocksdb_options_set_compression(rocksdb_options_t*, int);
void rocksdb_options_set_write_buffer_size(rocksdb_options_t*, size_t);
void rocksdb_options_set_db_write_buffer_size(rocksdb_options_t*, size_t);
void rocksdb_options_set_max_write_buffer_number(rocksdb_options_t*, int);
void rocksdb_options_set_max_background_jobs(rocksdb_options_t*, int);
void rocksdb_options_set_max_open_files(rocksdb_options_t*, int);
void rocksdb_options_set_max_total_wal_size(rocksdb_options_t* opt, uint64_t n);
void rocksdb_options_set_keep_log_file_num(rocksdb_options_t*, size_t);
void rocksdb_options_set_atomic_flush(rocksdb_options_t*, unsigned char);
void rocksdb_options_enable_statistics(rocksdb_options_t*);
char* rocksdb_options_statistics_get_string(rocksdb_options_t* opt);
void rocksdb_options_set_block_based_table_factory(
    rocksdb_options_t* opt, rocksdb_block_based_table_options_t* table_options);

rocksdb_block_based_table_options_t* rocksdb_block_based_options_create(void);
void rocksdb_block_based_options_destroy(rocksdb_block_based_table_options_t* options);
void rocksdb_block_based_options_set_block_size(
    rocksdb_block_based_table_options_t* options, size_t block_size);
void rocksdb_block_based_options_set_block_cache(
    rocksdb_block_based_table_options_t* options, rocksdb_cache_t* block_cache);
void rocksdb_block_based_options_set_no_block_cache(
    rocksdb_block_based_table_options_t* options, unsigned char no_block_cache);

rocksdb_cache_t* rocksdb_cache_create_lru(size_t capacity);
void rocksdb_cache_destroy(rocksdb_cache_t* cache);

/* open, close, column families */
rocksdb_t* rocksdb_open_column_families(
    const rocksdb_options_t* options, const char* name, int num_column_families,
    const char* const* column_family_names,
    const rocksdb_options_t* const* column_family_options,
    rocksdb_column_family_handle_t** column_family_handles, char** errptr);
void rocksdb_close(rocksdb_t* db);
char** rocksdb_list_column_families(
    const rocksdb_options_t* options, const char* name, size_t* lencf, char** errptr);
void rocksdb_list_column_families_destroy(char** list, size_t len);
rocksdb_column_family_handle_t* rocksdb_create_column_family(
    rocksdb_t* db, const rocksdb_options_t* column_family_options,
    const char* column_family_name, char** errptr);
void rocksdb_drop_column_family(
    rocksdb_t* db, rocksdb_column_family_handle_t* handle, char** errptr);
void rocksdb_column_family_handle_destroy(rocksdb_column_family_handle_t*);

/* writes */
rocksdb_writeoptions_t* rocksdb_writeoptions_create(void);
void rocksdb_writeoptions_destroy(rocksdb_writeoptions_t*);
void rocksdb_writeoptions_set_sync(rocksdb_writeoptions_t*, unsigned char);
void rocksdb_writeoptions_disable_WAL(rocksdb_writeoptions_t* opt, int disable);

rocksdb_writebatch_t* rocksdb_writebatch_create(void);
void rocksdb_writebatch_destroy(rocksdb_writebatch_t*);
void rocksdb_writebatch_clear(rocksdb_writebatch_t*);
int rocksdb_writebatch_count(rocksdb_writebatch_t*);
const char* rocksdb_writebatch_data(rocksdb_writebatch_t*, size_t* size);
void rocksdb_writebatch_put(
    rocksdb_writebatch_t*, const char* key, size_t klen, const char* val, size_t vlen);
void rocksdb_writebatch_put_cf(
    rocksdb_writebatch_t*, rocksdb_column_family_handle_t* column_family,
    const char* key, size_t klen, const char* val, size_t vlen);
void rocksdb_writebatch_delete(rocksdb_writebatch_t*, const char* key, size_t klen);
void rocksdb_writebatch_delete_cf(
    rocksdb_writebatch_t*, rocksdb_column_family_handle_t* column_family,
    const char* key, size_t klen);
void rocksdb_writebatch_delete_range(
    rocksdb_writebatch_t* b, const char* start_key, size_t start_key_len,
    const char* end_key, size_t end_key_len);
void rocksdb_writebatch_delete_range_cf(
    rocksdb_writebatch_t* b, rocksdb_column_family_handle_t* column_family,
    const char* start_key, size_t start_key_len, const char* end_key,
    size_t end_key_len);
void rocksdb_write(
    rocksdb_t* db, const rocksdb_writeoptions_t* options,
    rocksdb_writebatch_t* batch, char** errptr);
void rocksdb_put_cf(
    rocksdb_t* db, const rocksdb_writeoptions_t* options,
    rocksdb_column_family_handle_t* column_family, const char* key,
    size_t keylen, const char* val, size_t vallen, char** errptr);

/* reads */
rocksdb_readoptions_t* rocksdb_readoptions_create(void);
void rocksdb_readoptions_destroy(rocksdb_readoptions_t*);
void rocksdb_readoptions_set_fill_cache(rocksdb_readoptions_t*, unsigned char);
void rocksdb_readoptions_set_iterate_upper_bound(
    rocksdb_readoptions_t*, const char* key, size_t keylen);
void rocksdb_readoptions_set_iterate_lower_bound(
    rocksdb_readoptions_t*, const char* key, size_t keylen);
void rocksdb_readoptions_set_readahead_size(rocksdb_readoptions_t*, size_t);

rocksdb_pinnableslice_t* rocksdb_get_pinned_cf(
    rocksdb_t* db, const rocksdb_readoptions_t* options,
    rocksdb_column_family_handle_t* column_family, const char* key,
    size_t keylen, char** errptr);
void rocksdb_pinnableslice_destroy(rocksdb_pinnableslice_t* v);
const char* rocksdb_pinnableslice_value(const rocksdb_pinnableslice_t* t, size_t* vlen);

rocksdb_iterator_t* rocksdb_create_iterator_cf(
    rocksdb_t* db, const rocksdb_readoptions_t* options,
    rocksdb_column_family_handle_t* column_family);
void rocksdb_iter_destroy(rocksdb_iterator_t*);
unsigned char rocksdb_iter_valid(const rocksdb_iterator_t*);
void rocksdb_iter_seek_to_first(rocksdb_iterator_t*);
void rocksdb_iter_seek_to_last(rocksdb_iterator_t*);
void rocksdb_iter_seek(rocksdb_iterator_t*, const char* k, size_t klen);
void rocksdb_iter_seek_for_prev(rocksdb_iterator_t*, const char* k, size_t klen);
void rocksdb_iter_next(rocksdb_iterator_t*);
void rocksdb_iter_prev(rocksdb_iterator_t*);
const char* rocksdb_iter_key(const rocksdb_iterator_t*, size_t* klen);
const char* rocksdb_iter_value(const rocksdb_iterator_t*, size_t* vlen);
void rocksdb_iter_get_error(const rocksdb_iterator_t*, char** errptr);

/* maintenance and introspection */
rocksdb_flushoptions_t* rocksdb_flushoptions_create(void);
void rocksdb_flushoptions_destroy(rocksdb_flushoptions_t*);
void rocksdb_flushoptions_set_wait(rocksdb_flushoptions_t*, unsigned char);
void rocksdb_flush_cf(
    rocksdb_t* db, const rocksdb_flushoptions_t* options,
    rocksdb_column_family_handle_t* column_family, char** errptr);
void rocksdb_flush_wal(rocksdb_t* db, unsigned char sync, char** errptr);
void rocksdb_compact_range_cf(
    rocksdb_t* db, rocksdb_column_family_handle_t* column_family,
    const char* start_key, size_t start_key_len, const char* limit_key,
    size_t limit_key_len);
char* rocksdb_property_value(rocksdb_t* db, const char* propname);
char* rocksdb_property_value_cf(
    rocksdb_t* db, rocksdb_column_family_handle_t* column_family, const char* propname);
void rocksdb_approximate_sizes_cf(
    rocksdb_t* db, rocksdb_column_family_handle_t* column_family,
    int num_ranges, const char* const* range_start_key,
    const size_t* range_start_key_len, const char* const* range_limit_key,
    const size_t* range_limit_key_len, uint64_t* sizes, char** errptr);

/* our helpers (SOURCE below) */
#define LD_SPLIT_U16 1
#define LD_SKIP_BODY 2
#define LD_STOP_END 0
#define LD_STOP_COUNT 1
#define LD_STOP_BYTES 2
#define LD_STOP_FULL 3

typedef struct {
    char* keys;      uint64_t keys_cap;   uint64_t* key_offs;
    char* heads;     uint64_t heads_cap;  uint64_t* head_offs;
    char* bodies;    uint64_t bodies_cap; uint64_t* body_offs;
    uint64_t max_n;
    uint64_t max_bytes;
    int flags;
    uint64_t n;
    int stop;
    uint64_t consumed;
    uint64_t need_key, need_head, need_body;
} ld_read_t;

void ld_batch_put_many(
    rocksdb_writebatch_t* b, rocksdb_column_family_handle_t* cf, size_t n,
    const char* keys, const uint64_t* key_offs,
    const char* heads, const uint64_t* head_offs,
    const char* bodies, const uint64_t* body_offs);
void ld_batch_delete_many(
    rocksdb_writebatch_t* b, rocksdb_column_family_handle_t* cf, size_t n,
    const char* keys, const uint64_t* key_offs);
int64_t ld_batch_put_plan(
    rocksdb_writebatch_t* b, rocksdb_column_family_handle_t* cf,
    const char* plan, size_t plan_len, const char* bodies, size_t bodies_len);
uint64_t ld_iter_read(rocksdb_iterator_t* it, ld_read_t* r);
uint64_t ld_iter_read_keys(
    rocksdb_iterator_t* it, ld_read_t* r, size_t nwant,
    const char* wkeys, const uint64_t* wkey_offs, uint8_t* found);
typedef struct {
    rocksdb_readoptions_t* ro;
    rocksdb_iterator_t* it;
} ld_range_t;
int ld_read_range(
    rocksdb_t* db, rocksdb_column_family_handle_t* cf,
    const char* lower, size_t lower_len, const char* upper, size_t upper_len,
    uint64_t limit, ld_read_t* r, ld_range_t* rg, char** err);
int ld_range_more(ld_range_t* rg, uint64_t limit, ld_read_t* r, char** err);
void ld_range_free(ld_range_t* rg);
"""

SOURCE = r"""
#include <rocksdb/c.h>
#include <stdint.h>
#include <string.h>

#define LD_SPLIT_U16 1
#define LD_SKIP_BODY 2
#define LD_STOP_END 0
#define LD_STOP_COUNT 1
#define LD_STOP_BYTES 2
#define LD_STOP_FULL 3

typedef struct {
    char* keys;      uint64_t keys_cap;   uint64_t* key_offs;
    char* heads;     uint64_t heads_cap;  uint64_t* head_offs;
    char* bodies;    uint64_t bodies_cap; uint64_t* body_offs;
    uint64_t max_n;      /* stop after this many entries */
    uint64_t max_bytes;  /* stop once this many body bytes are taken (0: no limit) */
    int flags;           /* LD_SPLIT_U16, LD_SKIP_BODY */
    uint64_t n;          /* out: entries taken so far (offset arrays hold n + 1 values) */
    int stop;            /* out: why the last call returned (LD_STOP_*) */
    uint64_t consumed;   /* out: wanted keys dealt with (ld_iter_read_keys) */
    uint64_t need_key, need_head, need_body;  /* out: sizes of an entry that did not fit */
} ld_read_t;

static void ld_batch_put_many(
    rocksdb_writebatch_t* b, rocksdb_column_family_handle_t* cf, size_t n,
    const char* keys, const uint64_t* key_offs,
    const char* heads, const uint64_t* head_offs,
    const char* bodies, const uint64_t* body_offs)
{
    for (size_t i = 0; i < n; i++) {
        const char* k = keys + key_offs[i];
        size_t kl = (size_t)(key_offs[i + 1] - key_offs[i]);
        const char* v = bodies + body_offs[i];
        size_t vl = (size_t)(body_offs[i + 1] - body_offs[i]);
        if (heads != NULL) {
            const char* parts[2] = {heads + head_offs[i], v};
            size_t lens[2] = {(size_t)(head_offs[i + 1] - head_offs[i]), vl};
            if (cf != NULL)
                rocksdb_writebatch_putv_cf(b, cf, 1, &k, &kl, 2, parts, lens);
            else
                rocksdb_writebatch_putv(b, 1, &k, &kl, 2, parts, lens);
        } else if (cf != NULL) {
            rocksdb_writebatch_put_cf(b, cf, k, kl, v, vl);
        } else {
            rocksdb_writebatch_put(b, k, kl, v, vl);
        }
    }
}

static void ld_batch_delete_many(
    rocksdb_writebatch_t* b, rocksdb_column_family_handle_t* cf, size_t n,
    const char* keys, const uint64_t* key_offs)
{
    for (size_t i = 0; i < n; i++) {
        const char* k = keys + key_offs[i];
        size_t kl = (size_t)(key_offs[i + 1] - key_offs[i]);
        if (cf != NULL)
            rocksdb_writebatch_delete_cf(b, cf, k, kl);
        else
            rocksdb_writebatch_delete(b, k, kl);
    }
}

/* A put plan: entries back to back, each
     u32 key length K | u32 inline length V | u64 body offset | u64 body length |
     K bytes of key | V bytes of value
   (integers native-endian, no padding); the value is the V bytes followed by the body
   slice of `bodies`.  Returns how many entries were put, or -1 (and puts nothing) when
   an entry runs past the end of the plan or its body past the end of `bodies`. */
#define LD_PLAN_ENTRY 24

static int ld_plan_next(const char* plan, size_t plan_len, size_t* at, size_t bodies_len,
                        uint32_t* kl, uint32_t* vl, uint64_t* bo, uint64_t* bl)
{
    if (plan_len - *at < LD_PLAN_ENTRY) return 0;
    const char* e = plan + *at;
    memcpy(kl, e, 4);
    memcpy(vl, e + 4, 4);
    memcpy(bo, e + 8, 8);
    memcpy(bl, e + 16, 8);
    if (plan_len - *at - LD_PLAN_ENTRY < (uint64_t)*kl + *vl) return 0;
    if (*bo > bodies_len || *bl > bodies_len - *bo) return 0;
    *at += LD_PLAN_ENTRY + (size_t)*kl + *vl;
    return 1;
}

static int64_t ld_batch_put_plan(
    rocksdb_writebatch_t* b, rocksdb_column_family_handle_t* cf,
    const char* plan, size_t plan_len, const char* bodies, size_t bodies_len)
{
    uint32_t kl, vl;
    uint64_t bo, bl;
    size_t at = 0;
    int64_t n = 0;
    while (at < plan_len) {  /* check every entry before putting any */
        if (!ld_plan_next(plan, plan_len, &at, bodies_len, &kl, &vl, &bo, &bl)) return -1;
        n++;
    }
    at = 0;
    while (at < plan_len) {
        size_t start = at;
        ld_plan_next(plan, plan_len, &at, bodies_len, &kl, &vl, &bo, &bl);
        const char* k = plan + start + LD_PLAN_ENTRY;
        const char* v = k + kl;
        size_t klen = kl;
        if (bl) {
            const char* parts[2] = {v, bodies + bo};
            size_t lens[2] = {vl, (size_t)bl};
            if (cf != NULL)
                rocksdb_writebatch_putv_cf(b, cf, 1, &k, &klen, 2, parts, lens);
            else
                rocksdb_writebatch_putv(b, 1, &k, &klen, 2, parts, lens);
        } else if (cf != NULL) {
            rocksdb_writebatch_put_cf(b, cf, k, klen, v, vl);
        } else {
            rocksdb_writebatch_put(b, k, klen, v, vl);
        }
    }
    return n;
}

/* Copy the iterator's current entry into r; 0 if it does not fit (r->stop = FULL). */
static int ld_take(const rocksdb_iterator_t* it, ld_read_t* r)
{
    size_t kl, vl, hl = 0;
    const char* k = rocksdb_iter_key(it, &kl);
    const char* v = rocksdb_iter_value(it, &vl);
    if ((r->flags & LD_SPLIT_U16) && vl >= 2) {
        hl = (size_t)(unsigned char)v[0] | ((size_t)(unsigned char)v[1] << 8);
        if (hl > vl) hl = vl;
    }
    size_t bl = vl - hl;
    uint64_t ko = r->key_offs[r->n], ho = r->head_offs[r->n], bo = r->body_offs[r->n];
    int skip_body = (r->flags & LD_SKIP_BODY) != 0;
    if (ko + kl > r->keys_cap || ho + hl > r->heads_cap
            || (!skip_body && bo + bl > r->bodies_cap)) {
        r->stop = LD_STOP_FULL;
        r->need_key = kl; r->need_head = hl; r->need_body = bl;
        return 0;
    }
    memcpy(r->keys + ko, k, kl);
    if (hl) memcpy(r->heads + ho, v, hl);
    if (!skip_body && bl) memcpy(r->bodies + bo, v + hl, bl);
    r->n += 1;
    r->key_offs[r->n] = ko + kl;
    r->head_offs[r->n] = ho + hl;
    r->body_offs[r->n] = bo + bl;
    return 1;
}

static uint64_t ld_iter_read(rocksdb_iterator_t* it, ld_read_t* r)
{
    uint64_t start = r->n;
    r->stop = LD_STOP_END;
    while (rocksdb_iter_valid(it)) {
        if (r->n >= r->max_n) { r->stop = LD_STOP_COUNT; break; }
        if (r->max_bytes && r->body_offs[r->n] - r->body_offs[0] >= r->max_bytes) {
            r->stop = LD_STOP_BYTES; break;
        }
        if (!ld_take(it, r)) break;
        rocksdb_iter_next(it);
    }
    return r->n - start;
}

static int ld_cmp(const char* a, size_t al, const char* b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c) return c;
    return al < bl ? -1 : (al > bl ? 1 : 0);
}

/* Merge join of the iterator with sorted wanted keys: next() while the wanted key is near,
   seek() once a few next() calls did not reach it. */
static uint64_t ld_iter_read_keys(
    rocksdb_iterator_t* it, ld_read_t* r, size_t nwant,
    const char* wkeys, const uint64_t* wkey_offs, uint8_t* found)
{
    uint64_t start = r->n;
    size_t j = r->consumed;
    int steps = 0;
    r->stop = LD_STOP_END;
    if (j < nwant)
        rocksdb_iter_seek(it, wkeys + wkey_offs[j], (size_t)(wkey_offs[j + 1] - wkey_offs[j]));
    while (j < nwant) {
        if (!rocksdb_iter_valid(it)) {
            for (; j < nwant; j++) found[j] = 0;
            break;
        }
        const char* w = wkeys + wkey_offs[j];
        size_t wl = (size_t)(wkey_offs[j + 1] - wkey_offs[j]);
        size_t kl;
        const char* k = rocksdb_iter_key(it, &kl);
        int c = ld_cmp(k, kl, w, wl);
        if (c < 0) {
            if (steps < 8) { rocksdb_iter_next(it); steps++; }
            else { rocksdb_iter_seek(it, w, wl); steps = 0; }
            continue;
        }
        if (c > 0) { found[j++] = 0; continue; }
        if (r->n >= r->max_n) { r->stop = LD_STOP_COUNT; break; }
        if (r->max_bytes && r->body_offs[r->n] - r->body_offs[0] >= r->max_bytes) {
            r->stop = LD_STOP_BYTES; break;
        }
        if (!ld_take(it, r)) break;
        found[j++] = 1;
        rocksdb_iter_next(it);
        steps = 0;
    }
    r->consumed = j;
    return r->n - start;
}

/* A read of a range in progress: its iterator and the read options holding its bounds
   (the bound bytes belong to the caller and must outlive it). */
typedef struct {
    rocksdb_readoptions_t* ro;
    rocksdb_iterator_t* it;
} ld_range_t;

static void ld_range_free(ld_range_t* rg)
{
    if (rg->it != NULL) rocksdb_iter_destroy(rg->it);
    if (rg->ro != NULL) rocksdb_readoptions_destroy(rg->ro);
    rg->it = NULL;
    rg->ro = NULL;
}

/* Go on reading into r.  1: the read stopped for room (r full, or r->max_n reached
   below the caller's `limit`) and the range is kept for another call once r grew; 0:
   the read is over and the range freed (an iterator error, if any, is in *err). */
static int ld_range_more(ld_range_t* rg, uint64_t limit, ld_read_t* r, char** err)
{
    ld_iter_read(rg->it, r);
    if (r->stop == LD_STOP_FULL || (r->stop == LD_STOP_COUNT && r->n < limit))
        return 1;
    if (r->stop == LD_STOP_END)
        rocksdb_iter_get_error(rg->it, err);
    ld_range_free(rg);
    return 0;
}

/* Read [lower, upper) of cf from its start into r, up to `limit` entries (and
   r->max_bytes), as ld_range_more. */
static int ld_read_range(
    rocksdb_t* db, rocksdb_column_family_handle_t* cf,
    const char* lower, size_t lower_len, const char* upper, size_t upper_len,
    uint64_t limit, ld_read_t* r, ld_range_t* rg, char** err)
{
    rg->ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_iterate_lower_bound(rg->ro, lower, lower_len);
    rocksdb_readoptions_set_iterate_upper_bound(rg->ro, upper, upper_len);
    rg->it = rocksdb_create_iterator_cf(db, rg->ro, cf);
    rocksdb_iter_seek(rg->it, lower, lower_len);
    return ld_range_more(rg, limit, r, err);
}
"""

ffi = FFI()
ffi.cdef(CDEF)
ffi.set_source(
    "logdevice._rocksdb",
    SOURCE,
    libraries=["rocksdb"],
    extra_compile_args=["-O2"],
)

if __name__ == "__main__":
    ffi.compile(verbose=True)
