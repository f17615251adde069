/* One row times a row-major fp32 weight matrix, y = w @ x + bias, for a decode step of one token.
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
