/* One row times a row-major fp32 weight matrix, y = w @ x + bias, for a decode step of one token,
 * and (further down, with AVX2) a few rows times packed weights, for a decode step of a small batch.
 *
 * Each thread takes a contiguous run of output rows, so it streams one contiguous stretch of the
 * weights; four rows at a time share each load of x and keep four accumulators in flight. Built
 * with -fopenmp after PyTorch is loaded, so this library shares PyTorch's OpenMP runtime
 * (libgomp.so.1) and its threads instead of starting a second pool.
 */
typedef float lanes __attribute__((vector_size(64), aligned(4)));

static float lane_sum(lanes v) {
    float s = 0.0f;
    for (int i = 0; i < 16; i++) s += v[i];
    return s;
}

static float row_dot(const float *row, const float *x, long n) {
    lanes acc = {0};
    long i = 0;
    for (; i + 16 <= n; i += 16) acc += *(const lanes *)(row + i) * *(const lanes *)(x + i);
    float s = lane_sum(acc);
    for (; i < n; i++) s += row[i] * x[i];
    return s;
}

void gemv(const float *x, const float *w, const float *bias, float *y, long rows, long n, int threads) {
    long quads = rows / 4;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long q = 0; q < quads; q++) {
        const float *r0 = w + 4 * q * n, *r1 = r0 + n, *r2 = r1 + n, *r3 = r2 + n;
        lanes a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        long i = 0;
        for (; i + 16 <= n; i += 16) {
            lanes xv = *(const lanes *)(x + i);
            a0 += *(const lanes *)(r0 + i) * xv;
            a1 += *(const lanes *)(r1 + i) * xv;
            a2 += *(const lanes *)(r2 + i) * xv;
            a3 += *(const lanes *)(r3 + i) * xv;
        }
        float s0 = lane_sum(a0), s1 = lane_sum(a1), s2 = lane_sum(a2), s3 = lane_sum(a3);
        for (; i < n; i++) {
            s0 += r0[i] * x[i]; s1 += r1[i] * x[i]; s2 += r2[i] * x[i]; s3 += r3[i] * x[i];
        }
        y[4 * q] = s0; y[4 * q + 1] = s1; y[4 * q + 2] = s2; y[4 * q + 3] = s3;
    }
    for (long r = 4 * quads; r < rows; r++) y[r] = row_dot(w + r * n, x, n);
    if (bias)
        for (long r = 0; r < rows; r++) y[r] += bias[r];
}

#ifdef __AVX2__
/* The same product over packed weights (``packing.py``): each block of 32 weights of a row is
 * ``scale * code + offset`` with 4-bit codes (two to a byte: byte j holds codes j and j + 16), or
 * ``scale * code`` with 8-bit codes. A row is rebuilt in registers, so a step reads about a
 * fifth of the fp32 bytes. The rebuilt weight is exact (the product of a half-precision scale
 * and a small integer needs no rounding, and the fused add rounds once, as the stored fp32 weight
 * was rounded), and the sixteen lanes add up in the order of ``gemv`` above, so the result is the
 * plain kernel's bit for bit.
 */
#include <immintrin.h>

typedef struct { __m256 lo, hi; } pair;  /* lanes 0-7 and 8-15 of ``gemv``'s accumulator */

static float pair_sum(pair p) {
    float lane[16];
    _mm256_storeu_ps(lane, p.lo);
    _mm256_storeu_ps(lane + 8, p.hi);
    float s = 0.0f;
    for (int i = 0; i < 16; i++) s += lane[i];
    return s;
}

static inline __m256 unsigned8(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); }
static inline __m256 signed8(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)); }

/* Sixteen weights (codes in the low bytes of ``codes``) times x[0..15], into the accumulator. */
static inline pair affine16(pair acc, __m128i codes, __m256 scale, __m256 offset, const float *x) {
    __m256 lo = _mm256_fmadd_ps(scale, unsigned8(codes), offset);
    __m256 hi = _mm256_fmadd_ps(scale, unsigned8(_mm_srli_si128(codes, 8)), offset);
    acc.lo = _mm256_fmadd_ps(lo, _mm256_loadu_ps(x), acc.lo);
    acc.hi = _mm256_fmadd_ps(hi, _mm256_loadu_ps(x + 8), acc.hi);
    return acc;
}

static inline pair scaled16(pair acc, __m128i codes, __m256 scale, const float *x) {
    __m256 lo = _mm256_mul_ps(scale, signed8(codes));
    __m256 hi = _mm256_mul_ps(scale, signed8(_mm_srli_si128(codes, 8)));
    acc.lo = _mm256_fmadd_ps(lo, _mm256_loadu_ps(x), acc.lo);
    acc.hi = _mm256_fmadd_ps(hi, _mm256_loadu_ps(x + 8), acc.hi);
    return acc;
}

void gemv_affine4(const float *x, const unsigned char *codes, const float *scale, const float *offset,
                  const float *bias, float *y, long rows, long n, int threads) {
    long blocks = n / 32;
    const __m128i nibble = _mm_set1_epi8(0x0F);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; r++) {
        const unsigned char *row = codes + r * (n / 2);
        pair acc = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (long b = 0; b < blocks; b++) {
            __m128i packed = _mm_loadu_si128((const __m128i *)(row + 16 * b));
            __m256 s = _mm256_set1_ps(scale[r * blocks + b]), o = _mm256_set1_ps(offset[r * blocks + b]);
            acc = affine16(acc, _mm_and_si128(packed, nibble), s, o, x + 32 * b);
            acc = affine16(acc, _mm_and_si128(_mm_srli_epi16(packed, 4), nibble), s, o, x + 32 * b + 16);
        }
        float s = pair_sum(acc);
        y[r] = bias ? s + bias[r] : s;
    }
}

void gemv_scaled8(const float *x, const signed char *codes, const float *scale, const float *bias, float *y,
                  long rows, long n, int threads) {
    long blocks = n / 32;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; r++) {
        const signed char *row = codes + r * n;
        pair acc = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (long b = 0; b < blocks; b++) {
            __m256 s = _mm256_set1_ps(scale[r * blocks + b]);
            acc = scaled16(acc, _mm_loadu_si128((const __m128i *)(row + 32 * b)), s, x + 32 * b);
            acc = scaled16(acc, _mm_loadu_si128((const __m128i *)(row + 32 * b + 16)), s, x + 32 * b + 16);
        }
        float s = pair_sum(acc);
        y[r] = bias ? s + bias[r] : s;
    }
}

/* The same products for ``m`` rows of x at once (x [m, n], y [m, rows]), for a decode step of a small
 * batch: each block of a weight row is rebuilt once for up to four rows of x, so the packed weights are
 * read once a step, not once a request. Every row of x meets the weights in ``gemv_affine4``'s and
 * ``gemv_scaled8``'s order, so each row's result is the one-row kernel's bit for bit: a request's
 * numbers do not depend on who shares its step.
 */
#define TILE 4

/* One block of 32 rebuilt weights (w0-w3, eight each) times the same 32 columns of ``t`` rows of x, each row
 * into its own accumulator in ``affine16``'s order: lanes 0-7 take w0 then w2, lanes 8-15 w1 then w3. */
static inline __attribute__((always_inline)) void block32(pair *acc, __m256 w0, __m256 w1, __m256 w2, __m256 w3,
                                                          const float *x, long n, const int t) {
    for (int k = 0; k < t; k++) {
        const float *xk = x + k * n;
        acc[k].lo = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xk), acc[k].lo);
        acc[k].hi = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xk + 8), acc[k].hi);
        acc[k].lo = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xk + 16), acc[k].lo);
        acc[k].hi = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xk + 24), acc[k].hi);
    }
}

static inline __attribute__((always_inline)) void store_tile(const pair *acc, const float *bias, float *y, long rows,
                                                             const int t) {
    for (int k = 0; k < t; k++) {
        float sum = pair_sum(acc[k]);
        y[k * rows] = bias ? sum + *bias : sum;
    }
}

static inline __attribute__((always_inline)) void affine4_tile(
        const float *x, const unsigned char *row, const float *scale, const float *offset, const float *bias,
        float *y, long rows, long n, const int t) {
    long blocks = n / 32;
    const __m128i nibble = _mm_set1_epi8(0x0F);
    pair acc[TILE];
    for (int k = 0; k < t; k++) acc[k].lo = acc[k].hi = _mm256_setzero_ps();
    for (long b = 0; b < blocks; b++) {
        __m128i packed = _mm_loadu_si128((const __m128i *)(row + 16 * b));
        __m128i first = _mm_and_si128(packed, nibble), second = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
        __m256 s = _mm256_set1_ps(scale[b]), o = _mm256_set1_ps(offset[b]);
        __m256 w0 = _mm256_fmadd_ps(s, unsigned8(first), o);
        __m256 w1 = _mm256_fmadd_ps(s, unsigned8(_mm_srli_si128(first, 8)), o);
        __m256 w2 = _mm256_fmadd_ps(s, unsigned8(second), o);
        __m256 w3 = _mm256_fmadd_ps(s, unsigned8(_mm_srli_si128(second, 8)), o);
        block32(acc, w0, w1, w2, w3, x + 32 * b, n, t);
    }
    store_tile(acc, bias, y, rows, t);
}

void gemm_affine4(const float *x, const unsigned char *codes, const float *scale, const float *offset,
                  const float *bias, float *y, long m, long rows, long n, int threads) {
    long blocks = n / 32;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; r++) {
        const unsigned char *row = codes + r * (n / 2);
        const float *s = scale + r * blocks, *o = offset + r * blocks;
        const float *add = bias ? bias + r : 0;
        long i = 0;
        for (; i + TILE <= m; i += TILE) affine4_tile(x + i * n, row, s, o, add, y + i * rows + r, rows, n, TILE);
        switch (m - i) {  /* a constant count, so each case is unrolled with its accumulators in registers */
            case 3: affine4_tile(x + i * n, row, s, o, add, y + i * rows + r, rows, n, 3); break;
            case 2: affine4_tile(x + i * n, row, s, o, add, y + i * rows + r, rows, n, 2); break;
            case 1: affine4_tile(x + i * n, row, s, o, add, y + i * rows + r, rows, n, 1); break;
        }
    }
}

static inline __attribute__((always_inline)) void scaled8_tile(
        const float *x, const signed char *row, const float *scale, const float *bias, float *y, long rows, long n,
        const int t) {
    long blocks = n / 32;
    pair acc[TILE];
    for (int k = 0; k < t; k++) acc[k].lo = acc[k].hi = _mm256_setzero_ps();
    for (long b = 0; b < blocks; b++) {
        __m128i first = _mm_loadu_si128((const __m128i *)(row + 32 * b));
        __m128i second = _mm_loadu_si128((const __m128i *)(row + 32 * b + 16));
        __m256 s = _mm256_set1_ps(scale[b]);
        __m256 w0 = _mm256_mul_ps(s, signed8(first)), w1 = _mm256_mul_ps(s, signed8(_mm_srli_si128(first, 8)));
        __m256 w2 = _mm256_mul_ps(s, signed8(second)), w3 = _mm256_mul_ps(s, signed8(_mm_srli_si128(second, 8)));
        block32(acc, w0, w1, w2, w3, x + 32 * b, n, t);
    }
    store_tile(acc, bias, y, rows, t);
}

void gemm_scaled8(const float *x, const signed char *codes, const float *scale, const float *bias, float *y,
                  long m, long rows, long n, int threads) {
    long blocks = n / 32;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; r++) {
        const signed char *row = codes + r * n;
        const float *s = scale + r * blocks;
        const float *add = bias ? bias + r : 0;
        long i = 0;
        for (; i + TILE <= m; i += TILE) scaled8_tile(x + i * n, row, s, add, y + i * rows + r, rows, n, TILE);
        switch (m - i) {  /* a constant count, so each case is unrolled with its accumulators in registers */
            case 3: scaled8_tile(x + i * n, row, s, add, y + i * rows + r, rows, n, 3); break;
            case 2: scaled8_tile(x + i * n, row, s, add, y + i * rows + r, rows, n, 2); break;
            case 1: scaled8_tile(x + i * n, row, s, add, y + i * rows + r, rows, n, 1); break;
        }
    }
}
#endif
