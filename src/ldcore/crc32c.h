/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) for ldcore.
 *
 * Two implementations that must agree bit for bit:
 *   - ld_crc32c_hw: the SSE4.2 crc32 instruction, 8 bytes per step; compiled with a
 *     target attribute so the module still loads on CPUs without SSE4.2;
 *   - ld_crc32c_sw: portable slice-by-8 over eight 256-entry tables.
 * ld_crc32c_init() builds the tables and picks the implementation once, at module import.
 *
 * The "register" functions work on the raw (already inverted) CRC register; ld_crc32c()
 * takes and returns the finished value, so ld_crc32c(ld_crc32c(0, a), b) == crc(a + b).
 * Everything here is static: each module that includes this header gets its own copy,
 * and must call ld_crc32c_init() before use.
 */
#ifndef LDCORE_CRC32C_H
#define LDCORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LD_CRC32C_POLY 0x82F63B78u

static uint32_t ld_crc32c_table[8][256];
static int ld_crc32c_have_hw = 0;

static uint32_t ld_crc32c_sw(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        crc = ld_crc32c_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        /* little-endian load: the low byte is the first byte of the stream */
        uint32_t lo = (uint32_t)w ^ crc;
        uint32_t hi = (uint32_t)(w >> 32);
        crc = ld_crc32c_table[7][lo & 0xFF] ^
              ld_crc32c_table[6][(lo >> 8) & 0xFF] ^
              ld_crc32c_table[5][(lo >> 16) & 0xFF] ^
              ld_crc32c_table[4][lo >> 24] ^
              ld_crc32c_table[3][hi & 0xFF] ^
              ld_crc32c_table[2][(hi >> 8) & 0xFF] ^
              ld_crc32c_table[1][(hi >> 16) & 0xFF] ^
              ld_crc32c_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) {
        crc = ld_crc32c_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    }
    return crc;
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define LD_CRC32C_X86 1
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t ld_crc32c_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        crc = _mm_crc32_u8(crc, *p++);
        n--;
    }
#if defined(__x86_64__)
    uint64_t c64 = crc;
    while (n >= 32) {
        uint64_t a, b, c, d;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        memcpy(&c, p + 16, 8);
        memcpy(&d, p + 24, 8);
        c64 = _mm_crc32_u64(c64, a);
        c64 = _mm_crc32_u64(c64, b);
        c64 = _mm_crc32_u64(c64, c);
        c64 = _mm_crc32_u64(c64, d);
        p += 32;
        n -= 32;
    }
    while (n >= 8) {
        uint64_t a;
        memcpy(&a, p, 8);
        c64 = _mm_crc32_u64(c64, a);
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c64;
#else
    while (n >= 4) {
        uint32_t a;
        memcpy(&a, p, 4);
        crc = _mm_crc32_u32(crc, a);
        p += 4;
        n -= 4;
    }
#endif
    while (n--) {
        crc = _mm_crc32_u8(crc, *p++);
    }
    return crc;
}
#endif

static void ld_crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ LD_CRC32C_POLY : c >> 1;
        ld_crc32c_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = ld_crc32c_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = ld_crc32c_table[0][c & 0xFF] ^ (c >> 8);
            ld_crc32c_table[t][i] = c;
        }
    }
#ifdef LD_CRC32C_X86
    __builtin_cpu_init();
    ld_crc32c_have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

/* Raw register update with the implementation picked at init. */
static inline uint32_t ld_crc32c_reg(uint32_t crc, const unsigned char *p, size_t n)
{
#ifdef LD_CRC32C_X86
    if (ld_crc32c_have_hw)
        return ld_crc32c_hw(crc, p, n);
#endif
    return ld_crc32c_sw(crc, p, n);
}

/* Finished CRC32C of p[0:n], continuing from a previous finished value (0 to start). */
static inline uint32_t ld_crc32c(uint32_t value, const unsigned char *p, size_t n)
{
    return ~ld_crc32c_reg(~value, p, n);
}

static inline uint32_t ld_crc32c_portable(uint32_t value, const unsigned char *p, size_t n)
{
    return ~ld_crc32c_sw(~value, p, n);
}

#endif /* LDCORE_CRC32C_H */
