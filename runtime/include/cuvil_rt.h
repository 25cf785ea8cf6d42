/*
 * cuvil_rt.h -- the kernel API that generated model code calls.
 *
 * Everything here is compiled INTO every model (runtime/ never includes compiler code). The
 * compiler also links the same kernels to evaluate constant subgraphs at compile time.
 *
 * Conventions:
 *  - Every kernel takes a `const *_params *` whose fields are constants the compiler knows; the
 *    generated code declares these as `static const` initialisers, so field order matters:
 *    keep struct layouts in sync with src/codegen (which prints them field by field).
 *  - Tensors are dense, row-major. Sizes are element counts unless a name starts with `nb`.
 *  - Kernels never allocate. Those that need temporary memory take a `scratch` pointer with
 *    room for `*_scratch_size(p)` bytes (64-byte aligned), carved from the model's arena.
 *  - Output buffers never alias inputs unless a kernel says it allows it.
 *
 * Usage (what generated code looks like):
 *
 *     static const cuvil_conv2d_params p = { .N = 1, .C = 3, ... };
 *     cuvil_f32_conv2d(&p, x, w, b, NULL, y, scratch);
 */
#ifndef CUVIL_RT_H
#define CUVIL_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUVIL_RT_MAX_DIMS 8

/* ===== The CPU a model runs on ======================================================= */
/* Code that must run on any CPU of the architecture, whatever ISA flags its file is built
 * with: what a model's create() does before it knows the CPU has its target's features
 * (runtime/glue/cpu.c). On x86-64 that is code without AVX (SSE2 is in every x86-64). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CUVIL_RT_BASELINE __attribute__((target("no-avx")))
#else
#define CUVIL_RT_BASELINE
#endif
/* The first feature of `features` (space-separated names, as src/codegen/targets.inc lists a
 * target's: "avx2 fma f16c avx512f ...") this CPU or its operating system does not support:
 * a pointer to the name inside `features`, its length in *len (len may be NULL). NULL when
 * every one is supported (or the list is empty). A name the check does not know counts as
 * missing. Safe to call on any CPU of the architecture. */
CUVIL_RT_BASELINE const char *cuvil_rt_cpu_lacks(const char *features, size_t *len);

/* ===== Integer helpers of the dims' expressions (src/ir/dim.h prints them) ============ */
/* Floor division and the modulo with the divisor's sign (Python's // and %), for operands
 * whose signs the compiler could not prove; b != 0, and the compiler has bounded the values
 * inside +-2^62, so nothing overflows. */
static inline int64_t cuvil_fdiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
static inline int64_t cuvil_fmod(int64_t a, int64_t b) {
    int64_t r = a % b;
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
static inline int64_t cuvil_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t cuvil_imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* Activation applied elementwise; also the unary ops. Keep in ORDER with cuvil_act_names[]
 * (runtime/kernels/rt_int.h, unary.c) and the names in src/codegen/codegen.c. */
typedef enum cuvil_act {
    CUVIL_ACT_NONE = 0,      /* y = x */
    CUVIL_ACT_RELU,          /* max(x, 0) */
    CUVIL_ACT_LEAKY_RELU,    /* x >= 0 ? x : alpha * x */
    CUVIL_ACT_CLIP,          /* min(max(x, alpha), beta) */
    CUVIL_ACT_SIGMOID,       /* 1 / (1 + exp(-x)) */
    CUVIL_ACT_HARD_SIGMOID,  /* max(0, min(1, alpha * x + beta)) */
    CUVIL_ACT_HARD_SWISH,    /* x * max(0, min(1, x / 6 + 0.5)) */
    CUVIL_ACT_TANH,
    CUVIL_ACT_EXP,
    CUVIL_ACT_LOG,
    CUVIL_ACT_SQRT,
    CUVIL_ACT_NEG,
    CUVIL_ACT_ABS,
    CUVIL_ACT_RECIPROCAL,
    CUVIL_ACT_ERF,
    CUVIL_ACT_GELU,          /* 0.5 x (1 + erf(x / sqrt 2)) */
    CUVIL_ACT_ELU,           /* x >= 0 ? x : alpha * (exp(x) - 1) */
    CUVIL_ACT_SOFTPLUS,      /* log(1 + exp(x)) */
    CUVIL_ACT_MISH,          /* x * tanh(softplus(x)) */
    CUVIL_ACT_SILU,          /* x * sigmoid(x) */
    CUVIL_ACT_FLOOR,
    CUVIL_ACT_CEIL,
    CUVIL_ACT_ROUND,         /* half to even, as ONNX Round */
    CUVIL_ACT_SIN,
    CUVIL_ACT_COS,
    CUVIL_ACT_TAN,
    CUVIL_ACT_ASIN,
    CUVIL_ACT_ACOS,
    CUVIL_ACT_ATAN,
    CUVIL_ACT_SINH,
    CUVIL_ACT_COSH,
    CUVIL_ACT_ASINH,
    CUVIL_ACT_ACOSH,
    CUVIL_ACT_ATANH,
    CUVIL_ACT_SIGN,      /* -1, 0 or 1 (NaN stays NaN) */
    CUVIL_ACT_SOFTSIGN,  /* x / (1 + |x|) */
    CUVIL_ACT_SELU,      /* beta * (x > 0 ? x : alpha * (exp(x) - 1)) */
    CUVIL_ACT_THRESHOLDED_RELU, /* x > alpha ? x : 0 */
    CUVIL_ACT_SHRINK,    /* x < -alpha ? x + beta : x > alpha ? x - beta : 0 (alpha: lambd, beta: bias) */
    CUVIL_ACT_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
    CUVIL_ACT__COUNT
} cuvil_act;

/* One activation with its parameters (alpha/beta as in the comments above). */
typedef struct cuvil_act_params {
    int act;                 /* cuvil_act */
    float alpha;
    float beta;
} cuvil_act_params;

/* ===== Threads ==================================================================== */
/* A model context with n_threads > 1 owns a pool of n_threads - 1 workers (pool.c), started
 * at create and joined at destroy; its run binds the pool to the calling thread, and kernels
 * with enough work split it into tasks with cuvil_parallel_for (the caller runs tasks too).
 * Without a bound pool (one thread, compile-time folding) every task runs inline. Each thread
 * owns a slice of the context's scratch: thread t's is cuvil_thread_scratch(scratch, t), and
 * slice 0 is `scratch` itself. Built with -DCUVIL_NO_THREADS, no pool is ever made. */
#define CUVIL_MAX_THREADS 256
typedef struct cuvil_pool cuvil_pool;
typedef void (*cuvil_task_fn)(void *ctx, int64_t task, int tid);
/* NULL when n_threads <= 1, out of memory, or no thread could start (then run on one). The
 * pool keeps at most as many threads as the CPUs the process may run on (its affinity mask;
 * a pool of one runs everything on the caller), unless CUVIL_OVERSUBSCRIBE=1 is set. */
cuvil_pool *cuvil_pool_create(int n_threads, size_t scratch_stride,
                              void *(*alloc)(size_t size, size_t align, void *user),
                              void (*release)(void *p, void *user), void *user);
void cuvil_pool_destroy(cuvil_pool *p);
int cuvil_pool_threads(const cuvil_pool *p);        /* 1 for NULL */
size_t cuvil_pool_scratch_stride(const cuvil_pool *p);
/* Binds p (may be NULL) to the calling thread; returns the previous binding. */
const cuvil_pool *cuvil_pool_bind(const cuvil_pool *p);
/* Threads of the bound pool (1 when none). */
int cuvil_threads(void);
/* Runs fn(ctx, t, tid) for t in [0, n_tasks) on the bound pool's threads; returns when all
 * are done. tid < cuvil_threads() names the thread (for its scratch slice). */
void cuvil_parallel_for(int64_t n_tasks, cuvil_task_fn fn, void *ctx);
/* fn(ctx, begin, end, tid) over [0, n) in contiguous chunks of at least grain elements, whole
 * multiples of align (one call of the whole range on one thread or when n < 2 grain): the split
 * of an element-wise (align 64: cache lines) or row-wise (align 1) kernel. */
typedef void (*cuvil_range_fn)(void *ctx, int64_t begin, int64_t end, int tid);
void cuvil_parallel_range(int64_t n, int64_t grain, int64_t align, cuvil_range_fn fn, void *ctx);
void *cuvil_thread_scratch(void *scratch, int tid);

/* ===== 4-bit weights (q4gemm.c) ===================================================== */
/* y [M, N] = x [M, K] times W, W[k][n] = q * scales[n][b] - zs[n][b] for k's block b of bs (a
 * power of two >= 16), q the 4-bit value of w's column n (w [N, blocks * bs / 2], two values a
 * byte, low nibble first: com.microsoft MatMulNBits' B); zs the zero point times the scale.
 * scratch: cuvil_matmul_q4_scratch_size bytes. */
typedef struct cuvil_q4_params {
    int64_t M, K, N, bs;
} cuvil_q4_params;
size_t cuvil_matmul_q4_scratch_size(int64_t M, int64_t K, int64_t bs);
void cuvil_matmul_q4(const cuvil_q4_params *p, const float *x, const uint8_t *w, const float *scales, const float *zs,
                     float *y, void *scratch);
/* the reference: the same arithmetic one element at a time, no threads, no scratch */
void cuvil_matmul_q4__scalar(const cuvil_q4_params *p, const float *x, const uint8_t *w, const float *scales,
                             const float *zs, float *y);

/* ===== GEMM ====================================================================== */
/* batch == 0 means no work (an empty tensor). */
/* C[m,n] = act(alpha * sum_k A'[m,k] B'[k,n] + beta * bias[m*bias_rs + n*bias_cs])
 * where A' = trans_a ? A^T : A (A is stored [K,M] with row stride lda when transposed, else
 * [M,K]), likewise B'. bias may be NULL (then beta is ignored); its strides may be 0 to
 * broadcast (bias_rs = 0, bias_cs = 1 is a per-column [N] bias).
 * batch > 1 repeats the product: A, B, bias and C advance by *_bstride elements per batch
 * item. For broadcasting batched MatMul the compiler emits one call per distinct stride
 * pattern, so strides may be 0. */
typedef struct cuvil_gemm_params {
    int64_t M, N, K;
    int64_t lda, ldb, ldc;
    int trans_a, trans_b;
    float alpha, beta;
    int64_t bias_rs, bias_cs;
    int64_t batch;
    int64_t a_bstride, b_bstride, c_bstride, bias_bstride;
    cuvil_act_params act;
    /* B packed at compile time (cuvil_f32_gemm_pack_b): the microkernel columns and K blocking
     * it was packed for; 0 when B is dense. A packed B is the same for every batch item
     * (b_bstride 0). */
    int64_t packed_nr, packed_kc;
} cuvil_gemm_params;

size_t cuvil_f32_gemm_scratch_size(const cuvil_gemm_params *p);
/* B ([K, N], or [N, K] with trans_b) rearranged into the panels the GEMM reads with
 * p->packed_nr columns and p->packed_kc blocking (cuvil_f32_gemm_packed_b_floats floats), so
 * that running never repacks it; cuvil_f32_gemm then takes the packed copy as B. */
size_t cuvil_f32_gemm_packed_b_floats(const cuvil_gemm_params *p);
void cuvil_f32_gemm_pack_b(const cuvil_gemm_params *p, const float *B, float *B_packed);
void cuvil_f32_gemm(const cuvil_gemm_params *p, const float *A, const float *B,
                    const float *bias, float *C, void *scratch);
/* The same on a B packed as above (p->packed_nr, p->packed_kc) whose values are stored in 16
 * bits, kind CUVIL_W16_F16 (IEEE half), CUVIL_W16_BF16 or CUVIL_W16_BF16_DOT (bfloat16;
 * cuvil_f32_gemm_packed_b_floats(p) of them: --precision fp16|bf16 keeps a product's weights so
 * in memory). Each is widened exactly to float32 as it is read; the arithmetic is
 * cuvil_f32_gemm's on those values (with _DOT: and on alpha * A rounded to bfloat16), the
 * scratch cuvil_f32_gemm_scratch_size's. */
void cuvil_f32_gemm_w16(const cuvil_gemm_params *p, int kind, const float *A, const uint16_t *B16,
                        const float *bias, float *C, void *scratch);
/* Naive reference with the same contract (no scratch); used by tests and constant folding. */
void cuvil_f32_gemm__scalar(const cuvil_gemm_params *p, const float *A, const float *B,
                            const float *bias, float *C);

/* ===== Convolution ================================================================ */
/* 2-D convolution, NCHW, weights [M, C/group, KH, KW], bias [M] or NULL.
 * y = act(conv(x, w) + bias + residual), residual [N,M,OH,OW] or NULL. residual may be the
 * same buffer as y (an in-place residual add) but neither may alias x.
 * A 1-D convolution is a 2-D one with H = KH = OH = 1. */
typedef struct cuvil_conv2d_params {
    int64_t N, C, H, W;
    int64_t M, OH, OW;
    int64_t KH, KW;
    int64_t stride_h, stride_w;
    int64_t pad_t, pad_l;        /* bottom/right padding is implied by OH/OW */
    int64_t dil_h, dil_w;
    int64_t group;
    cuvil_act_params act;
    /* The GEMM algorithm with weights packed at compile time (cuvil_f32_conv2d_pack): the
     * microkernel rows and K blocking they were packed for; 0 when not packed. */
    int64_t packed_mr, packed_kc;
    /* CUVIL_CONV_WINOGRAD: 3x3 stride 1 by Winograd F(4x4, 3x3) on weights the compiler
     * transformed (cuvil_f32_conv2d_pack, with packed_mr/packed_kc); CUVIL_CONV_GEMM_T: the
     * GEMM with the roles swapped, pixels as rows (y' = im2col(x)' w', for few pixels: the
     * microkernel's rows fit them better than its columns), the weights packed as the B
     * operand for a microkernel of packed_mr (its NR) columns; 0: the GEMM paths. */
    int64_t algo;
    /* Channels-last tensors, CUVIL_CONV_X_NHWC and CUVIL_CONV_Y_NHWC; 0: all NCHW. */
    int64_t layout;
} cuvil_conv2d_params;
/* x is [N, H, W, C] (channels last). */
#define CUVIL_CONV_X_NHWC 1
/* y and the residual are [N, OH, OW, M]. */
#define CUVIL_CONV_Y_NHWC 2
/* Whether a conv takes p->layout: the pixels-as-rows GEMM (algo CUVIL_CONV_GEMM_T, group 1,
 * weights prepacked), Winograd with tiles as rows (CUVIL_CONV_WINOGRAD_T and _WINOGRAD2_T,
 * prepacked; x and y each either way), the direct convolution CUVIL_CONV_DIRECT_T (x and y
 * each either way, weights always tap-major), and the depthwise conv (multiplier 1,
 * undilated, x and y both channels last or neither). Prepacked depthwise weights with a layout are tap-major, [KH*KW][M]; so
 * is K in the prepacked weights of a GEMM with several taps and a channels-last x (k = tap C
 * + c: a tap's channels are contiguous in x). The layout pass of the lowering
 * (src/lower/layout.c) sets it where producer and consumers agree. */
int cuvil_conv2d_layout_ok(const cuvil_conv2d_params *p);
/* Whether cuvil_f32_conv2d_pack packs p's weights for its layout (tap-major, as above): then a
 * conv given a layout after its weights were packed needs them packed again. (Not
 * CUVIL_CONV_DIRECT_T's, tap-major whatever the layout.) */
int cuvil_conv2d_packed_tap_major(const cuvil_conv2d_params *p);
/* The conv's algorithm (cuvil_conv2d_params.algo): the GEMM (im2col, or the input itself
 * for a 1x1 stride-1 conv), its weights packed as A, when none of those below. */
#define CUVIL_CONV_GEMM 0
#define CUVIL_CONV_WINOGRAD 1
#define CUVIL_CONV_GEMM_T 2
/* Winograd whose 36 GEMMs have the roles swapped (tiles as rows, the transformed weights
 * packed as B for packed_mr columns): for few tiles (14x14: 16), which fill MR rows better
 * than NR columns. */
#define CUVIL_CONV_WINOGRAD_T 3
/* Winograd F(2x2, 3x3) with tiles as rows (16 points, the weights packed as for
 * CUVIL_CONV_WINOGRAD_T): for maps too small for 4x4 tiles (7x7); x and y each either layout. */
#define CUVIL_CONV_WINOGRAD2_T 5
/* Direct convolution (group 1, stride 1 or 2, undilated): the GEMM of the weights (packed
 * as for algo 0) and the im2col matrix, whose rows the microkernel reads in place from a
 * zero-padded copy of the input (stride 2: split into its four phases) instead of packing
 * them. */
#define CUVIL_CONV_DIRECT 4
int cuvil_conv2d_direct_applies(const cuvil_conv2d_params *p);
/* A stem (3x3 stride 2 on at most 4 input channels, groups and dilations 1), which the x86
 * runtimes' direct path (CUVIL_CONV_DIRECT) runs with a kernel of its own; the lowering picks
 * the direct path for it there. */
int cuvil_conv2d_stem_applies(const cuvil_conv2d_params *p);
/* Direct convolution with pixels as rows (group 1, undilated): each image copied once,
 * zero-padded and channels last (from x in either layout), and read in place by MR x NR
 * register tiles of output pixels x output channels, on weights packed as for
 * CUVIL_CONV_GEMM_T with a channels-last x (tap-major, packed_mr = NR); y either layout. */
#define CUVIL_CONV_DIRECT_T 6
int cuvil_conv2d_direct_t_applies(const cuvil_conv2d_params *p);
/* Grouped convolution with few channels a group (group > 1, at least 2 input channels a
 * group; any stride, dilation, padding; x and y channels first): direct, a group's output
 * channels the lanes of a vector, on weights packed per group, per chunk of
 * CUVIL_GCONV_LANES output channels, tap-major (packed_mr = CUVIL_GCONV_LANES). */
#define CUVIL_CONV_GROUPED 7
#define CUVIL_GCONV_LANES 8
int cuvil_conv2d_grouped_applies(const cuvil_conv2d_params *p);
/* Whether the depthwise loop (one input channel per group) runs p vectorised: register-tiled
 * (3x3, 5x5 or 7x7, stride 1 or 2, undilated) or along unit-stride rows; else it gathers one input
 * column per output and tap, and the GEMM is faster where there are several outputs per input
 * channel (src/lower/conv.c). */
int cuvil_conv2d_dw_vectorized(const cuvil_conv2d_params *p);
/* Whether algo's weights are packed as a GEMM's B (packed_mr: the microkernel's NR), not A. */
int cuvil_conv2d_algo_packs_b(int64_t algo);

size_t cuvil_f32_conv2d_scratch_size(const cuvil_conv2d_params *p);
void cuvil_f32_conv2d(const cuvil_conv2d_params *p, const float *x, const float *w,
                      const float *bias, const float *residual, float *y, void *scratch);
/* Prepacked weights: w ([M, C/group, KH, KW]) rearranged, per group, into the panels the GEMM
 * reads with p->packed_mr rows and p->packed_kc blocking, so that running never repacks them
 * (cuvil_f32_conv2d_packed_floats floats). Depthwise convolutions take their weights as they
 * are. With algo CUVIL_CONV_WINOGRAD the weights are Winograd-transformed first, through tmp
 * (cuvil_f32_conv2d_pack_tmp_floats floats; NULL when that is 0). */
size_t cuvil_f32_conv2d_packed_floats(const cuvil_conv2d_params *p);
/* Whether Winograd can run p (3x3, stride 1, undilated, one group), whatever p->algo says. */
int cuvil_conv2d_winograd_applies(const cuvil_conv2d_params *p);
/* Whether p is a 1x1 conv with a stride and no padding, which runs as the 1x1 stride-1 conv of
 * a subsampled copy of each image (its scratch holds the copy). */
int cuvil_conv2d_strided_pointwise(const cuvil_conv2d_params *p);
size_t cuvil_f32_conv2d_pack_tmp_floats(const cuvil_conv2d_params *p);
void cuvil_f32_conv2d_pack(const cuvil_conv2d_params *p, const float *w, float *w_packed, float *tmp);
void cuvil_f32_conv2d_prepacked(const cuvil_conv2d_params *p, const float *x, const float *w_packed,
                                const float *bias, const float *residual, float *y, void *scratch);
void cuvil_f32_conv2d__scalar(const cuvil_conv2d_params *p, const float *x, const float *w,
                              const float *bias, const float *residual, float *y);

/* An inverted-residual block (mbblock.c): y = pr(dw(ex(x))) (+ residual), where ex and pr are
 * 1x1 convs with weights prepacked for the GEMM (cuvil_f32_conv2d_pack; algo 0) and dw a
 * depthwise 3x3 or 5x5 conv of stride 1 or 2, each with its bias (or NULL) and activation:
 * the same result as the three cuvil_f32_conv2d_prepacked calls, computed band by band of
 * output rows so that the middle tensors stay in cache. y must not overlap x; residual may be
 * NULL, or y itself (an in-place residual add). With ex all zero (ex.M == 0) there is no expand conv: y = pr(dw(x)), we and be unused.
 * cuvil_mbblock_applies tells whether the convs fit that pattern. */
typedef struct cuvil_mbblock_params {
    cuvil_conv2d_params ex, dw, pr;
} cuvil_mbblock_params;
int cuvil_mbblock_applies(const cuvil_mbblock_params *p);
size_t cuvil_f32_mbblock_scratch_size(const cuvil_mbblock_params *p);
void cuvil_f32_mbblock(const cuvil_mbblock_params *p, const float *x, const float *we, const float *be,
                       const float *wd, const float *bd, const float *wp, const float *bp, const float *residual,
                       float *y, void *scratch);

/* 2-D transposed convolution, NCHW, weights [C, M/group, KH, KW], bias [M] or NULL.
 * y[n, m, oh, ow] accumulates x[n,c,h,w] * w[c, m', kh, kw] where
 * oh = h*stride_h - pad_t + kh*dil_h (likewise ow); OH/OW are given (they include
 * output_padding). */
typedef struct cuvil_conv_transpose2d_params {
    int64_t N, C, H, W;
    int64_t M, OH, OW;
    int64_t KH, KW;
    int64_t stride_h, stride_w;
    int64_t pad_t, pad_l;
    int64_t dil_h, dil_w;
    int64_t group;
    cuvil_act_params act;
} cuvil_conv_transpose2d_params;

size_t cuvil_f32_conv_transpose2d_scratch_size(const cuvil_conv_transpose2d_params *p);
void cuvil_f32_conv_transpose2d(const cuvil_conv_transpose2d_params *p, const float *x,
                                const float *w, const float *bias, float *y, void *scratch);
void cuvil_f32_conv_transpose2d__scalar(const cuvil_conv_transpose2d_params *p,
                                        const float *x, const float *w, const float *bias,
                                        float *y);

/* ===== Pooling ==================================================================== */
enum { CUVIL_POOL_MAX = 0, CUVIL_POOL_AVG = 1, CUVIL_POOL_LP2 = 2 };

/* 2-D pooling, NCHW. A window with no tap inside the input gives -FLT_MAX for MAX (as ONNX
 * Runtime) and 0 for AVG/LP2. Window of output (oh, ow) starts at oh*stride_h - pad_t and covers
 * KH taps spaced dil_h. Taps outside the input are skipped. For AVG the divisor is the number
 * of taps inside the input, or, when count_include_pad, the number of taps inside the padded
 * input [-pad_t, H + pad_b) (so windows that ceil_mode pushes past the padding count less).
 * Global pooling is KH = H, KW = W, OH = OW = 1. */
typedef struct cuvil_pool2d_params {
    int kind;
    int64_t N, C, H, W;
    int64_t OH, OW;
    int64_t KH, KW;
    int64_t stride_h, stride_w;
    int64_t pad_t, pad_l, pad_b, pad_r;
    int64_t dil_h, dil_w;
    int count_include_pad;
    /* CUVIL_POOL_X_NHWC: x is channels last ([N, H, W, C]); global pooling only (y, [N, C],
     * is the same either way). 0: NCHW. */
    int layout;
} cuvil_pool2d_params;
#define CUVIL_POOL_X_NHWC 1

void cuvil_f32_pool2d(const cuvil_pool2d_params *p, const float *x, float *y);
void cuvil_f32_pool2d__scalar(const cuvil_pool2d_params *p, const float *x, float *y);

/* ===== Einsum (einsum.c) ============================================================
 * y[o] = sum over the summed labels of prod_k x_k[...], naively: n_lab loop labels of sizes
 * sizes[], the first n_out_lab of them y's dims in order (y row-major), the rest summed;
 * operand k reads element sum_l idx[l] * strides[k * CUVIL_EINSUM_MAX_LAB + l]. Types
 * CUVIL_T_F32/F64 (accumulated in double) and I32/I64/U32/U64 (wrapping). */
#define CUVIL_EINSUM_MAX_IN 8
#define CUVIL_EINSUM_MAX_LAB 32
void cuvil_einsum_t(int type, int n_in, int n_lab, int n_out_lab, const int64_t *sizes, const int64_t *strides,
                    const void *const *x, void *y);

/* y[b] = det(x[b]) for batch matrices of M x M (LU with partial pivoting, in double);
 * scratch holds 8 * M * M bytes. */
void cuvil_f32_det(int64_t batch, int64_t M, const float *x, float *y, void *scratch);

/* ===== DFT and STFT (dft.c), float32, direct sums ====================================
 * DFT: x [outer, len, inner, 1 or 2 (in_complex)] along len, n points (the input zero-padded or
 * cut to n); mode 0 forward, 1 inverse (divided by n), both complex out; mode 2 the inverse of a
 * one-sided spectrum (its first n/2 + 1 bins), real out (numpy's irfft). y [outer, out_len,
 * inner, 2 (mode 2: 1)], out_len the bins kept (n, or n/2 + 1 one-sided). */
typedef struct cuvil_dft_params {
    int mode, in_complex;
    int64_t outer, len, inner, n, out_len;
} cuvil_dft_params;
void cuvil_f32_dft(const cuvil_dft_params *p, const float *x, float *y);
/* STFT: x [batch, sig_len, 1 or 2]; frame f takes win_len samples from f * step (zero past the
 * end) times window (NULL: ones), transformed with n points; y [batch, frames, bins, 2]. */
typedef struct cuvil_stft_params {
    int in_complex;
    int64_t batch, sig_len, step, frames, win_len, n, bins;
} cuvil_stft_params;
void cuvil_f32_stft(const cuvil_stft_params *p, const float *x, const float *window, float *y);
/* The same with the axis and dft_length (STFT: frame_step and frame_length) read when the
 * model runs where *_t names their type (CUVIL_T_I32/I64; 0: the constant field; n, flen -1:
 * the default): 1 when they are invalid or give another output than the compiled one. */
typedef struct cuvil_dft_rt_params {
    int ndim, inverse, onesided, axis_t, len_t;
    int64_t axis, n, dims[8], out_dims[8];
} cuvil_dft_rt_params;
int cuvil_f32_dft_rt(const cuvil_dft_rt_params *p, const void *axis, const void *len, const float *x, float *y);
typedef struct cuvil_stft_rt_params {
    int in_complex, onesided, step_t, len_t;
    int64_t batch, sig_len, win_len, step, flen, frames, bins;   /* win_len: the window's, -1 without one */
} cuvil_stft_rt_params;
int cuvil_f32_stft_rt(const cuvil_stft_rt_params *p, const void *step, const void *len, const float *x,
                      const float *window, float *y);

/* ===== RotaryEmbedding (rotary.c) =====================================================
 * y = x with the first rot dims of every head rotated by the angle whose cos/sin the caches
 * give: pairs (x[j], x[j + rot/2]), or (x[2j], x[2j+1]) interleaved, become (c x1 - s x2,
 * s x1 + c x2). x [B, H, S, D] (x4d) or [B, S, H, D]; cache row pos[b, s] (of max_pos; 1 when
 * one is outside them) or b * S + s without pos. */
int cuvil_f32_rotary(int interleaved, int x4d, int64_t B, int64_t S, int64_t H, int64_t D, int64_t rot, int64_t max_pos,
                     const float *x, const float *cos_c, const float *sin_c, const int64_t *pos, float *y);

/* ===== Ops whose output shape an input sets (geom.c); each returns 1 when the input's
 * values (read when the model runs) are invalid or give another shape than the compiled one.
 * CenterCropPad: x [in_dims] to y [out_dims] (ndim <= 8), each axis centred: cropped from
 * (in - out) / 2 or padded with zeros before by (out - in) / 2; shape[i] is axes[i]'s size. */
int cuvil_center_crop_pad(int ndim, const int64_t *in_dims, const int64_t *out_dims, int n_axes, const int64_t *axes,
                          const int64_t *shape, size_t esize, const void *x, void *y);
/* AffineGrid: grid [N, sp..., nd] = theta[n] ([nd, nd + 1]) times (x, y[, z], 1) of each point,
 * the coordinates in -1..1 (align_corners: the end points on the corners); size (nd + 2 values)
 * must be N, any C, then sp. */
int cuvil_f32_affine_grid(int nd, int align_corners, int64_t N, const int64_t *sp, const int64_t *size,
                          const float *theta, float *grid);
/* Col2Im: x [N, C * prod(block), L] summed into y [N, C, img...] (nsp dims), block tap t of
 * block position l at img coordinate l_i * st_i - pads_i + t_i * d_i (pads: begins, ends). */
int cuvil_f32_col2im(int nsp, int64_t N, int64_t C, int64_t CK, int64_t L, const int64_t *img, const int64_t *d,
                     const int64_t *st, const int64_t *pads, const int64_t *image_shape, const int64_t *block_shape,
                     const float *x, float *y);

/* ===== States carried between calls (recur.c) =======================================
 * CausalConvWithState: y [B, C, L] = bias + the depthwise convolution (w [C, 1, K]) of past
 * [B, C, K - 1] (NULL: zeros) followed by x [B, C, L], silu'd when asked; present (NULL: not
 * wanted) the last K - 1 columns of that sequence. */
void cuvil_f32_causal_conv(int64_t B, int64_t C, int64_t L, int64_t K, int silu, const float *x, const float *w,
                           const float *bias, const float *past, float *y, float *present);
/* LinearAttention: q [B, T, hq * dk], k [B, T, hk * dk], v [B, T, hk * dv]; per batch item and
 * kv head a state [dk, dv] (past [B, hk, dk, dv] or zeros) steps through t: times exp(decay)
 * (gated; decay [B, T, hk] or [B, T, hk * dk]), v replaced by beta * (v - state' k) (delta;
 * beta [B, T, hk] or [B, T, 1]), plus k v'; then each query head of the group reads scale *
 * q state. y [B, T, hq * dv]; present the final states (NULL: not wanted). scratch holds
 * (dk + 1) * dv floats. */
typedef struct cuvil_linear_attention_params {
    int gated, delta;
    int64_t B, T, hq, hk, dk, dv, decay_w, beta_w;
    float scale;
} cuvil_linear_attention_params;
void cuvil_f32_linear_attention(const cuvil_linear_attention_params *p, const float *q, const float *k, const float *v,
                                const float *past, const float *decay, const float *beta, float *y, float *present,
                                void *scratch);

/* The additive mask of ONNX Runtime's contrib attention from a mask index (op_sdpa.c's
 * mask_index): y [B, rows, T] = 0 where a key is visible, else filter; mask of type t
 * (CUVIL_T_I32/I64/BOOL) holds counts [B] (ndim 1: key j visible when j < count), or 0/1 per
 * key [B, T] (ndim 2) or per query and key [B, rows, T] (ndim 3). */
void cuvil_mask_index(int t, int ndim, int64_t B, int64_t rows, int64_t T, const void *mask, float filter, float *y);
/* GroupQueryAttention's lengths as Cuvil takes them (op_sdpa.c's gqa_check): 1 unless *total
 * is P + S and every seqlens[b] is P + S - 1; else y = key (nbytes). */
int cuvil_gqa_check(int64_t B, int64_t S, int64_t P, const int32_t *seqlens, const int32_t *total, const void *key,
                    void *y, size_t nbytes);

/* ===== TfIdfVectorizer (tfidf.c) =====================================================
 * y [rows, out_size] float32 from x [rows, C] (int32 when x_i32, else int64): for every skip
 * distance d in 1..max_skip+1 and start i, each n in [min_n, max_n] (n >= 2 past d = 1) whose
 * tokens x[i], x[i+d], ... x[i+(n-1)d] lie in the row and equal n-gram g of the table adds 1
 * at column out[g] (mode 1, TF), sets it to weights[g] (2, IDF; NULL weights: 1) or adds
 * weights[g] (3, TFIDF; NULL: 1): ONNX's weights are per n-gram of the pool, as ONNX Runtime
 * reads them (ONNX's reference indexes them by output column). */
typedef struct cuvil_tfidf_params {
    int mode, x_i32;
    int64_t rows, C, out_size, min_n, max_n, max_skip, n_grams;
    const int64_t *tokens, *start, *len, *out;
    const float *weights;
} cuvil_tfidf_params;
void cuvil_tfidf(const cuvil_tfidf_params *p, const void *x, float *y);

/* ===== N-D pooling and convolution (pool_nd.c, conv_nd.c) ============================
 * Any number of spatial dims nsp (1..CUVIL_ND_MAX), NC<spatial> layout, for the forms the 2-D
 * kernels leave out: 3-D, LpPool of any p, MaxPool's Indices and its integer types.
 * Window o along spatial dim i starts at o*s[i] - pb[i] and has k[i] taps spaced d[i]; taps
 * outside the input are skipped (padding is ignored by max, zero for the sums). */
#define CUVIL_ND_MAX 4
enum { CUVIL_POOLND_MAX = 0, CUVIL_POOLND_AVG = 1, CUVIL_POOLND_LP = 2 };
typedef struct cuvil_pool_nd_params {
    int nsp, kind;
    int dtype;                 /* CUVIL_T_F32; max also CUVIL_T_U8, CUVIL_T_I8 */
    int count_include_pad;     /* avg: the divisor counts taps inside [-pb, in + pe) */
    int storage_order;         /* indices: 0 row-major, 1 column-major spatial offsets */
    int64_t N, C, p;           /* p: LpPool's exponent */
    int64_t in[CUVIL_ND_MAX], out[CUVIL_ND_MAX], k[CUVIL_ND_MAX], s[CUVIL_ND_MAX], d[CUVIL_ND_MAX];
    int64_t pb[CUVIL_ND_MAX], pe[CUVIL_ND_MAX];
} cuvil_pool_nd_params;
/* y [N, C, out...]; indices (NULL: none) the flat index into x of each max (ONNX MaxPool's
 * second output: batch and channel offsets included). A window with no tap inside gives the
 * type's lowest value (max, index -1) or 0. */
void cuvil_pool_nd(const cuvil_pool_nd_params *p, const void *x, void *y, int64_t *indices);

/* Convolution and its transpose over nsp spatial dims, float32: x [N, C, in...], w [M,
 * C/group, k...] (transpose: [C, M/group, k...]), bias [M] or NULL, y [N, M, out...]. The
 * convolution is vol2col + GEMM per batch item and group; the transpose a GEMM then col2vol.
 * scratch holds cuvil_f32_conv_nd_scratch_size bytes. */
typedef struct cuvil_conv_nd_params {
    int nsp, transpose;
    int64_t N, C, M, group;
    int64_t in[CUVIL_ND_MAX], out[CUVIL_ND_MAX], k[CUVIL_ND_MAX], s[CUVIL_ND_MAX], d[CUVIL_ND_MAX];
    int64_t pb[CUVIL_ND_MAX];
} cuvil_conv_nd_params;
size_t cuvil_f32_conv_nd_scratch_size(const cuvil_conv_nd_params *p);
void cuvil_f32_conv_nd(const cuvil_conv_nd_params *p, const float *x, const float *w, const float *bias, float *y,
                       void *scratch);
/* Naive reference with the same contract (no scratch); tests and constant folding. */
void cuvil_f32_conv_nd__scalar(const cuvil_conv_nd_params *p, const float *x, const float *w, const float *bias,
                               float *y);

/* ===== Elementwise ================================================================ */
/* y[i] = act(x[i]) for i < n. y may equal x. */
void cuvil_f32_unary(const cuvil_act_params *a, const float *x, float *y, size_t n);
void cuvil_f32_unary__scalar(const cuvil_act_params *a, const float *x, float *y, size_t n);
/* One element, for epilogues and tests. */
float cuvil_f32_act1(const cuvil_act_params *a, float x);

/* Keep in ORDER with the switch in runtime/kernels/elementwise/binary.c. */
enum {
    CUVIL_BIN_ADD = 0, CUVIL_BIN_SUB, CUVIL_BIN_MUL, CUVIL_BIN_DIV, CUVIL_BIN_POW,
    CUVIL_BIN_MAX, CUVIL_BIN_MIN,
    CUVIL_BIN_PRELU,    /* a >= 0 ? a : a * b */
    CUVIL_BIN_MOD,      /* a - b * floor(a / b): the result has b's sign (integers: b = 0 gives 0) */
    CUVIL_BIN_FMOD,     /* C's fmod: the result has a's sign (integers: b = 0 gives 0) */
    /* integers only (cuvil_binary_t): a shift below 0 or by the type's width or more gives 0
     * (right, of a negative value: -1); right shifts of signed types are arithmetic; NOT ignores b */
    CUVIL_BIN_SHL, CUVIL_BIN_SHR, CUVIL_BIN_BAND, CUVIL_BIN_BOR, CUVIL_BIN_BXOR, CUVIL_BIN_BNOT,
    CUVIL_BIN__COUNT,
    CUVIL_BIN__FLOAT_COUNT = CUVIL_BIN_SHL   /* the ops before it also have float kernels */
};

/* y[idx] = act(a[idx . a_strides] OP b[idx . b_strides]) over the output index space dims
 * (numpy broadcasting: a broadcast dim has stride 0). y may equal a or b when that operand has
 * y's dense row-major strides (not broadcast, not transposed). */
typedef struct cuvil_binary_params {
    int op;
    int ndim;
    int64_t dims[CUVIL_RT_MAX_DIMS];
    int64_t a_strides[CUVIL_RT_MAX_DIMS];
    int64_t b_strides[CUVIL_RT_MAX_DIMS];
    cuvil_act_params act;
} cuvil_binary_params;

void cuvil_f32_binary(const cuvil_binary_params *p, const float *a, const float *b, float *y);
/* The fields of p that follow from the dims (ndim, dims, strides), from the ranks nd[] and
 * dims d[] of n = 3 values: a, b and y (op and act are left as they are). The compiler fills
 * them with it at compile time, a model with symbolic dims when it runs. */
void cuvil_binary_bind(cuvil_binary_params *p, int n, const int *nd, const int64_t *const *d);
void cuvil_f32_binary__scalar(const cuvil_binary_params *p, const float *a, const float *b,
                              float *y);

/* y[n,c,i] = act(x[n,c,i] * scale[c] + shift[c]), x viewed as [N, C, inner]; y may equal x.
 * (Inference BatchNormalization after the compiler folds mean/var/eps into scale/shift.) */
typedef struct cuvil_channel_affine_params {
    int64_t N, C, inner;
    cuvil_act_params act;
} cuvil_channel_affine_params;

void cuvil_f32_channel_affine(const cuvil_channel_affine_params *p, const float *x,
                              const float *scale, const float *shift, float *y);
/* LocalResponseNormalization over x [N, C, inner]: y = x / (bias + alpha / size * the sum of the
 * squares of the channels c - (size - 1) / 2 .. c + size / 2)^beta. */
void cuvil_f32_lrn(int64_t N, int64_t C, int64_t inner, int64_t size, float alpha, float beta, float bias, const float *x,
                   float *y);
/* GridSample: x [N, C, in_dims...] sampled at grid [N, out_dims..., nd] (normalised coordinates
 * in -1..1, the innermost first: x, y, z) into y [N, C, out_dims...], nd = 1..3 spatial dims;
 * mode 0 nearest (half to even), 1 linear, 2 cubic (Keys, -0.75); padding 0 zeros, 1 border,
 * 2 reflection; as ONNX's reference computes it, but for cubic with border padding, where only
 * the taps are clamped (PyTorch's and ONNX Runtime's rule). */
typedef struct cuvil_grid_sample_params {
    int nd, mode, padding, align_corners;
    int64_t N, C, in_dims[3], out_dims[3];
} cuvil_grid_sample_params;
void cuvil_f32_grid_sample(const cuvil_grid_sample_params *p, const float *x, const float *grid, float *y);
/* BatchNormalization's parameters read when the model runs: scale = gamma / sqrt(var + eps),
 * shift = beta - mean * scale (in double, then rounded), C of each. */
void cuvil_f32_bn_affine(int64_t C, float eps, const float *gamma, const float *beta, const float *mean, const float *var,
                         float *scale, float *shift);

/* ===== Attention =================================================================== */
/* y = softmax(scale * q k' + mask) v for every batch item b and head h, q, k, v and y read and
 * written through element strides (batch, head, row; each row contiguous): q rows of dim, k
 * rows of dim, v and y rows of v_dim; q_len query rows, kv_len key/value rows. mask (NULL:
 * none) is float32 added to the scores, or with mask_bool uint8 where 0 hides the key, read at
 * b * m_bs + h * m_hs + i * m_rs + j * m_cs (0 strides broadcast). causal: query i sees keys
 * j <= i + kv_len - q_len. A row that sees no key is NaN, or 0 with empty_rows_zero (1: a row
 * with a NaN score too, as Where(IsNaN(p), 0, p) makes; 2: only one that sees no key, as ONNX
 * Attention). y must not overlap q, k, v or the mask. */
typedef struct cuvil_attention_params {
    int64_t batch, heads, q_len, kv_len, dim, v_dim;
    int64_t q_bs, q_hs, q_rs;
    int64_t k_bs, k_hs, k_rs;
    int64_t v_bs, v_hs, v_rs;
    int64_t y_bs, y_hs, y_rs;
    float scale;
    int64_t m_bs, m_hs, m_rs, m_cs;
    int mask_bool;
    int causal;
    int empty_rows_zero;
    /* ONNX Attention's forms (all 0: the above alone): query head h reads key/value head
     * h / kv_group (grouped-query attention; 0 or 1: its own); softcap > 0 maps each score s to
     * softcap * tanh(s / softcap) before the mask; the causal frontier is j <= i + kv_len - q_len
     * - causal_lag; a mask of m_cols < kv_len columns hides the keys after them (0: kv_len);
     * window: query i sees keys j with -win_right <= i + kv_len - q_len - causal_lag - j <=
     * win_left (a bound of -1: unbounded). */
    int64_t kv_group;
    float softcap;
    int64_t causal_lag, m_cols;
    int window;
    int64_t win_left, win_right;
} cuvil_attention_params;

size_t cuvil_f32_attention_scratch_size(const cuvil_attention_params *p);
void cuvil_f32_attention(const cuvil_attention_params *p, const float *q, const float *k, const float *v,
                         const void *mask, float *y, void *scratch);
/* The same, also writing the scores into qk ([batch, heads, q_len, kv_len], contiguous; NULL:
 * not) at stage qk_mode: 0 or 1 scaled and soft-capped, 2 with the masks added, 3 the softmax.
 * nonpad (NULL: none; ONNX's nonpad_kv_seqlen, the external cache): batch item b has nonpad[b]
 * valid keys, the others hidden, and its queries sit at nonpad[b] - q_len + i for the causal
 * frontier and the window (causal_lag unused). */
void cuvil_f32_attention_qk(const cuvil_attention_params *p, const float *q, const float *k, const float *v,
                            const void *mask, const int64_t *nonpad, float *y, float *qk, int qk_mode, void *scratch);
/* ONNX Attention's cache: present[b, h, 0:p_len] = past[b, h] (contiguous [batch, heads, p_len,
 * dim]; NULL when p_len is 0), present[b, h, p_len:p_len+s_len] = cur rows read through element
 * strides (batch, head, row). */
void cuvil_f32_kv_concat(const float *past, int64_t p_len, const float *cur, int64_t c_bs, int64_t c_hs, int64_t c_rs,
                         int64_t s_len, int64_t batch, int64_t heads, int64_t dim, float *present);
/* Naive reference with the same contract (no scratch; kv_len floats on the stack). */
void cuvil_f32_attention__scalar(const cuvil_attention_params *p, const float *q, const float *k, const float *v,
                                 const void *mask, float *y);

/* ===== Recurrent layers (ONNX RNN, GRU, LSTM) ===================================== */
enum { CUVIL_CELL_RNN = 0, CUVIL_CELL_GRU, CUVIL_CELL_LSTM };
/* The activations ONNX's recurrent ops name (CUVIL_RNN_ACT_*), with their alpha and beta. */
enum {
    CUVIL_RNN_ACT_SIGMOID = 0, CUVIL_RNN_ACT_TANH, CUVIL_RNN_ACT_RELU, CUVIL_RNN_ACT_AFFINE, CUVIL_RNN_ACT_LEAKY_RELU,
    CUVIL_RNN_ACT_THRESHOLDED_RELU, CUVIL_RNN_ACT_SCALED_TANH, CUVIL_RNN_ACT_HARD_SIGMOID, CUVIL_RNN_ACT_ELU,
    CUVIL_RNN_ACT_SOFTSIGN, CUVIL_RNN_ACT_SOFTPLUS, CUVIL_RNN_ACT__COUNT
};
typedef struct cuvil_rnn_act {
    int fn;
    float alpha, beta;
} cuvil_rnn_act;
/* x [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1); per direction d (dirs 1
 * or 2; with 1, reverse runs it backwards) w [gates * hidden, input], r [gates * hidden, hidden],
 * b [2 * gates * hidden] (may be NULL: 0); h0 and c0 [dirs, batch, hidden] (layout 1: [batch, dirs,
 * hidden]; NULL: 0); peepholes
 * [3 * hidden] (LSTM: i, o, f; NULL: none), in ONNX's gate order (GRU z, r, h; LSTM i, o, f,
 * c). seq_lens (int32 [batch], NULL: all seq) stops each batch item's steps: its later outputs
 * are 0 and its state is that of its last step (0 for a length of 0, as ONNX Runtime gives). y [seq, dirs, batch, hidden] (layout 1: [batch,
 * seq, dirs, hidden]), yh and yc [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]); each
 * may be NULL. act[d]: f, g, h (RNN: f only; GRU: f, g). clip > 0 clips the gates' inputs. The
 * inputs of every step are one GEMM per direction, the recurrence a GEMM per step on R packed
 * once. Returns 1 when a sequence length is outside 0..seq. */
typedef struct cuvil_rnn_params {
    int cell, dirs, reverse, layout;
    int64_t seq, batch, input, hidden;
    float clip;
    int linear_before_reset, input_forget;
    cuvil_rnn_act act[2][3];
} cuvil_rnn_params;
size_t cuvil_f32_rnn_scratch_size(const cuvil_rnn_params *p);
int cuvil_f32_rnn(const cuvil_rnn_params *p, const float *x, const float *w, const float *r, const float *b,
                  const int32_t *seq_lens, const float *h0, const float *c0, const float *peep, float *y, float *yh,
                  float *yc, void *scratch);
/* The same on w and r packed ahead (cuvil_f32_rnn_pack, in packed_nr-column panels with
 * packed_kc blocking: cuvil_f32_rnn_packed_floats floats, which depend on neither the sequence
 * nor the batch); w and r are then not read (NULL). */
size_t cuvil_f32_rnn_packed_floats(const cuvil_rnn_params *p, int nr);
size_t cuvil_f32_rnn_packed_scratch_size(const cuvil_rnn_params *p);
void cuvil_f32_rnn_pack(const cuvil_rnn_params *p, const float *w, const float *r, int nr, int64_t kc, float *dst);
int cuvil_f32_rnn_packed(const cuvil_rnn_params *p, const float *x, const float *w, const float *r, const float *packed,
                         int packed_nr, int64_t packed_kc, const float *b, const int32_t *seq_lens, const float *h0,
                         const float *c0, const float *peep, float *y, float *yh, float *yc, void *scratch);
/* An LSTM on 8-bit weights (cuvil_rnn_q8_weights) as com.microsoft DynamicQuantizeLSTM computes
 * it (ONNX Runtime's kernel): the products on the integer GEMM, each of its float operands
 * quantized first as DynamicQuantizeLinear does (uint8, the range of the operand and 0): x once
 * for every step's input projection (the steps up to the longest sequence length), h (all batch
 * rows together) before each step's product with r. Layout 0 only. (ONNX Runtime quantizes h
 * the same way for one batch row, or several on one thread; with sequence lengths that differ
 * across the batch it zeroes finished rows' h and aligns reversed rows, so there the 8-bit
 * rounding of h may differ from Cuvil's.) The
 * int32 sums times (the operand's scale x the weights' scale) are the float products; the cell
 * is cuvil_f32_rnn's. w [dirs, input, 4 hidden] and r [dirs, hidden, 4 hidden] (wt: CUVIL_T_I8
 * or CUVIL_T_U8; ONNX Runtime's layout, the gates in LSTM's order) packed when the model compiles
 * by cuvil_rnn_q8_pack (split: each pair-split where few pairs need it, cuvil_qgemm_pack_b_split,
 * for a CPU without VNNI; the layout's size the same either way); their scales float32 per direction (n == dirs) or per gate row (dirs x 4
 * hidden), their zero points NULL (0) or as many as the scales, of type wt. LSTM only. */
typedef struct cuvil_rnn_q8_weights {
    int wt;
    const void *packed;
    const float *w_scale, *r_scale;
    int64_t ws_n, rs_n;
    const void *w_zp, *r_zp;
} cuvil_rnn_q8_weights;
size_t cuvil_rnn_q8_packed_bytes(const cuvil_rnn_params *p);
void cuvil_rnn_q8_pack(const cuvil_rnn_params *p, int split, int wt, const void *w, const void *r, void *dst);
size_t cuvil_rnn_q8_scratch_size(const cuvil_rnn_params *p);
int cuvil_rnn_q8(const cuvil_rnn_params *p, const cuvil_rnn_q8_weights *q, const float *x, const float *b, const int32_t *seq_lens,
                 const float *h0, const float *c0, const float *peep, float *y, float *yh, float *yc, void *scratch);

/* ===== Normalisation and reductions ================================================ */
/* x viewed as [outer, axis_len, inner]; softmax (or log-softmax) along the middle axis.
 * y may equal x. */
typedef struct cuvil_softmax_params {
    int64_t outer, axis_len, inner;
    int log;
    int nan_to_zero;   /* NaN results are 0 (a row of -inf, masked out entirely): Where(IsNaN(y), 0, y) */
} cuvil_softmax_params;

void cuvil_f32_softmax(const cuvil_softmax_params *p, const float *x, float *y);
void cuvil_f32_softmax__scalar(const cuvil_softmax_params *p, const float *x, float *y);
/* Hardmax on the same layout (log ignored): 1 at the first largest element of each run along the
 * axis, 0 elsewhere; x and y must not overlap. */
void cuvil_f32_hardmax(const cuvil_softmax_params *p, const float *x, float *y);

/* LayerNormalization over the last `len` elements of each of `rows` rows (x viewed as
 * [rows, len]); scale and bias (may be NULL) have len elements; y may equal x. mean and
 * inv_std (each may be NULL) get each row's mean and 1 / sqrt(variance + epsilon). rms:
 * RMSNormalization, y = x / sqrt(mean(x^2) + epsilon) * scale (+ bias), the mean taken as 0. */
typedef struct cuvil_layer_norm_params {
    int64_t rows, len;
    float epsilon;
    int rms;
} cuvil_layer_norm_params;

void cuvil_f32_layer_norm(const cuvil_layer_norm_params *p, const float *x, const float *scale, const float *bias,
                          float *y, float *mean, float *inv_std);

/* InstanceNormalization: x viewed as [batch, channels, len]; each row of len elements is
 * normalised, then scaled by scale[c] and shifted by bias[c]; y may equal x. */
typedef struct cuvil_instance_norm_params {
    int64_t batch, channels, len;
    float epsilon;
} cuvil_instance_norm_params;

void cuvil_f32_instance_norm(const cuvil_instance_norm_params *p, const float *x, const float *scale, const float *bias,
                             float *y);

enum {
    CUVIL_REDUCE_SUM = 0, CUVIL_REDUCE_MEAN, CUVIL_REDUCE_MAX, CUVIL_REDUCE_MIN,
    CUVIL_REDUCE_PROD, CUVIL_REDUCE_SUM_SQUARE, CUVIL_REDUCE_L1, CUVIL_REDUCE_L2,
    CUVIL_REDUCE_LOG_SUM_EXP
};

/* The portable references of the families below (reduce, channel_affine, pad, resize,
 * transpose, slice) are declared in runtime/kernels/rt_int.h for the tests. */
/* Reduces x[dims] over the axes whose bit is set in mask; y has the kept dims in order (the
 * keepdims question is only a reshape). An empty mask copies. */
typedef struct cuvil_reduce_params {
    int op;
    int ndim;
    int64_t dims[CUVIL_RT_MAX_DIMS];
    uint32_t mask;
} cuvil_reduce_params;

void cuvil_f32_reduce(const cuvil_reduce_params *p, const float *x, float *y);
/* The same for element type t (CUVIL_T_*, not bool): integers wrap like their type, floats
 * accumulate in double. */
void cuvil_reduce_t(const cuvil_reduce_params *p, int t, const void *x, void *y);
/* The axes read when the model runs: n of them (element type idx_t, CUVIL_T_I32 or CUVIL_T_I64)
 * into p->mask (p's op, ndim and dims given) and the output's dims into out_dims (keepdims: the
 * input's rank, 1 where reduced; else the kept dims), each at most hi[i]. 1 when an axis is out
 * of range or repeated, or a dim over its room. */
int cuvil_reduce_axes_rt(cuvil_reduce_params *p, int n, int idx_t, const void *axes, int keepdims, const int64_t *hi,
                         int64_t *out_dims);

/* ONNX's NegativeLogLikelihoodLoss over x[n, c, d] (log-probabilities; d: the product of the
 * dims after the classes), targets t[n, d] (int32 or int64 by idx_t, CUVIL_T_I32/I64) and
 * optional weights w[c]: reduction CUVIL_LOSS_NONE writes y[n, d], SUM and MEAN one value (mean:
 * over the weights of the targets not ignored). Returns 1 when a target is outside 0..c-1 and
 * not the ignored index (has_ignore). */
enum { CUVIL_LOSS_NONE = 0, CUVIL_LOSS_SUM, CUVIL_LOSS_MEAN };
int cuvil_f32_nll_loss(const float *x, int idx_t, const void *t, const float *w, int64_t n, int64_t c, int64_t d,
                       int reduction, int has_ignore, int64_t ignore, float *y);

/* ===== Data movement (dtype-agnostic: elem_size bytes per element) ================= */
/* y = transpose(x, perm): y dim i is x dim perm[i]; dims are x's. */
typedef struct cuvil_transpose_params {
    int ndim;
    int64_t elem_size;
    int64_t dims[CUVIL_RT_MAX_DIMS];
    int perm[CUVIL_RT_MAX_DIMS];
} cuvil_transpose_params;

void cuvil_transpose(const cuvil_transpose_params *p, const void *x, void *y);

/* Where a buffer of the generated code lives, for kernels that take a list of buffers (Concat,
 * Split): the list is a static table of references, resolved at run time into pointers in
 * scratch memory, so a node with many inputs needs neither stack nor code per input. */
typedef enum cuvil_ref_kind {
    CUVIL_REF_ARENA = 0,     /* byte offset in the activation arena */
    CUVIL_REF_WEIGHTS,       /* byte offset in the weights blob */
    CUVIL_REF_INPUT,         /* graph input number */
    CUVIL_REF_OUTPUT         /* graph output number */
} cuvil_ref_kind;

typedef struct cuvil_ref {
    int32_t kind;            /* cuvil_ref_kind */
    int64_t index;
    int64_t offset;          /* an output's: bytes into the caller's buffer (0 for the others) */
} cuvil_ref;

/* ptrs[i] = the address refs[i] names. */
void cuvil_resolve_refs(const cuvil_ref *refs, int64_t n, unsigned char *arena, const unsigned char *weights,
                        const void *const *in, void *const *out, void **ptrs);

/* Concat: the output is `outer` rows; row r is, for each input i in order, the nb_chunk[i]
 * bytes of input i's row r. Split is the inverse. */
void cuvil_concat(int64_t outer, int n_in, const int64_t *nb_chunk, const void *const *ins,
                  void *y);
void cuvil_split(int64_t outer, int n_out, const int64_t *nb_chunk, const void *x,
                 void *const *outs);

/* y[i0..] = x[starts[d] + i_d * steps[d] ...] for the out dims; steps may be negative. */
typedef struct cuvil_slice_params {
    int ndim;
    int64_t elem_size;
    int64_t in_dims[CUVIL_RT_MAX_DIMS];
    int64_t out_dims[CUVIL_RT_MAX_DIMS];
    int64_t starts[CUVIL_RT_MAX_DIMS];
    int64_t steps[CUVIL_RT_MAX_DIMS];
} cuvil_slice_params;

void cuvil_slice(const cuvil_slice_params *p, const void *x, void *y);
/* One axis of size dim sliced by ONNX's rules (step != 0): a negative start or end counts from
 * the end, then both clamp (step > 0: to [0, dim]; step < 0: start to [0, dim - 1], end to
 * [-1, dim - 1]); returns the element count, *start and *step made the kernel's (start 0 for
 * an empty slice, |step| at most max(dim, 1)). */
int64_t cuvil_slice_axis(int64_t dim, int64_t *start, int64_t end, int64_t *step);
/* Sizes read from tensors when the model runs (int32 or int64 by the *_t: CUVIL_T_I32 or
 * CUVIL_T_I64). cuvil_slice_rt: p's ndim, elem_size and in_dims given, the rest from the n
 * starts, ends, axes (NULL: 0..n-1) and steps (NULL: 1s) by ONNX's rules; cuvil_reshape_dims:
 * out[0..n) from Reshape's shape (0 copies the input's dim unless allowzero, one -1 is
 * inferred), their product the input's. Both return 1 for values the op refuses (a step of
 * 0, a repeated axis, a product that differs) or a dim over hi[] (the room planned for it),
 * else 0. */
/* Squeeze's (unsqueeze 0) or Unsqueeze's output dims from n axes read when the model runs
 * (idx_t: CUVIL_T_I32/I64), each at most hi[i]; 1 when an axis is out of range or repeated, or
 * a squeezed dim is not 1. */
int cuvil_squeeze_dims(int unsqueeze, int idx_t, const void *axes, int n, const int64_t *in_dims, int in_ndim,
                       const int64_t *hi, int64_t *out);
/* Split's n sizes read when the model runs (idx_t: CUVIL_T_I32/I64) into out, each in 0..hi[i],
 * adding up to dim; else 1. */
int cuvil_split_sizes_rt(int idx_t, const void *split, int n, int64_t dim, const int64_t *hi, int64_t *out);
int cuvil_slice_rt(cuvil_slice_params *p, int n, int idx_t, const void *starts, const void *ends, const void *axes,
                   const void *steps, const int64_t *hi);
int cuvil_reshape_dims(int shape_t, const void *shape, int n, const int64_t *in_dims, int in_ndim, int allowzero,
                       const int64_t *hi, int64_t *out);

enum { CUVIL_PAD_CONSTANT = 0, CUVIL_PAD_REFLECT, CUVIL_PAD_EDGE, CUVIL_PAD_WRAP };

/* out_dims[d] = in_dims[d] + pad_begin[d] + pad_end[d]; pads may be negative (crop). */
typedef struct cuvil_pad_params {
    int mode;
    int ndim;
    int64_t in_dims[CUVIL_RT_MAX_DIMS];
    int64_t out_dims[CUVIL_RT_MAX_DIMS];
    int64_t pad_begin[CUVIL_RT_MAX_DIMS];
    float value;
} cuvil_pad_params;

void cuvil_f32_pad(const cuvil_pad_params *p, const float *x, float *y);
/* The pads read when the model runs (n_pads of type idx_t, CUVIL_T_I32/I64, for the axes, n_axes
 * of them of the same type, or every axis when axes is NULL) into p's pad_begin and out_dims (p's
 * mode, ndim and in_dims given), each output dim at most hi[d]; 1 when they are not valid for
 * the input as ONNX Runtime takes them (a crop past the axis, reflect or wrap past what it
 * holds, an axis out of range or repeated). */
int cuvil_pad_rt(cuvil_pad_params *p, int idx_t, const void *pads, int n_pads, const void *axes, int n_axes,
                 const int64_t *hi);
/* The same for elements of es bytes (any type; p->value unused): the constant is the es bytes
 * at value (NULL: zeros). */
void cuvil_pad_t(const cuvil_pad_params *p, size_t es, const void *x, void *y, const void *value);

/* Gather along one axis with constant indices: x viewed as [outer, axis_len, inner*elem],
 * y[o, j, :] = x[o, idx[j], :]; indices are already made non-negative by the compiler. */
typedef struct cuvil_gather_params {
    int64_t outer, axis_len, nb_inner, n_idx;
} cuvil_gather_params;

void cuvil_gather(const cuvil_gather_params *p, const int64_t *idx, const void *x, void *y);
/* The same from a float32 table stored in 16 bits (x, kind CUVIL_W16_F16 or _BF16: an
 * embedding table under --precision fp16|bf16), each row widened into y; p as for the float32
 * table (nb_inner its rows' bytes in float32). */
void cuvil_gather_w16(const cuvil_gather_params *p, int kind, const int64_t *idx, const uint16_t *x, float *y);

/* ===== Every element type (typed.c, index.c) ========================================
 * Element types, numbered as the compiler's cir_dtype. float16 and bfloat16 compute in
 * float32; integers wrap around (two's complement) instead of overflowing. */
enum {
    CUVIL_T_F32 = 1, CUVIL_T_F64, CUVIL_T_F16, CUVIL_T_BF16,
    CUVIL_T_I8, CUVIL_T_I16, CUVIL_T_I32, CUVIL_T_I64,
    CUVIL_T_U8, CUVIL_T_U16, CUVIL_T_U32, CUVIL_T_U64,
    CUVIL_T_BOOL,
    CUVIL_T_I4, CUVIL_T_U4   /* one element per byte: -8..7, 0..15 */
};

/* IEEE half and bfloat16 <-> float32, rounding to nearest even (overflow to infinity, NaN
 * stays NaN). */
uint16_t cuvil_f32_to_f16(float f);
uint16_t cuvil_f32_to_bf16(float f);
float cuvil_f16_to_f32(uint16_t h);
float cuvil_bf16_to_f32(uint16_t h);
/* How a kernel reads weights stored in 16 bits: IEEE half, bfloat16, or CUVIL_W16_BF16_DOT:
 * bfloat16 weights whose product takes its other operand rounded to bfloat16 too (nearest even;
 * a subnormal counts as zero), summed in float32: AVX-512 BF16's vdpbf16ps where the CPU has it,
 * the same rounded values in float32 FMAs elsewhere (which keep a subnormal weight that
 * vdpbf16ps counts as zero: weights under 1.2e-38). */
enum { CUVIL_W16_F16 = 1, CUVIL_W16_BF16 = 2, CUVIL_W16_BF16_DOT = 3 };
/* dst[i] = src[i] widened (exact) from kind's 16-bit type, i < n. */
void cuvil_widen16(int kind, const uint16_t *src, float *dst, size_t n);
/* float32 -> kind (CUVIL_W16_F16 or _BF16), rounded to nearest even: cuvil_f32_to_f16 / _bf16's
 * bits. Returns nonzero when a finite value overflowed to an infinity (all n are converted). */
int cuvil_narrow16(int kind, const float *src, uint16_t *dst, size_t n);
/* A tensor's n values narrowed so (narrow != 0: src float32, dst 16 bits; returns the overflow
 * flag) or widened (src 16 bits, dst float32; returns 0), split over the bound pool's threads. */
int cuvil_cast16(int kind, int narrow, const void *src, void *dst, size_t n);

/* Weights stored in 16 bits (cuvil-compile --precision fp16|bf16): the library holds its
 * float32 weights as IEEE half or bfloat16 and create() expands them, once per context, into
 * the float32 layout the nodes read. A segment copies n bytes (CUVIL_WSEG_RAW) or widens n
 * 16-bit values from src to float32 at dst (byte offsets). */
enum { CUVIL_WSEG_RAW = 0, CUVIL_WSEG_F16 = 1, CUVIL_WSEG_BF16 = 2, CUVIL_WSEG_TRANSIENT = 8 };
typedef struct cuvil_wseg {
    uint64_t dst, src, n;
    uint32_t kind;
} cuvil_wseg;
/* Expands the n_segs segments of src into dst, or with CUVIL_WSEG_TRANSIENT into x (the
 * sources of weights packed when a context is created, freed after). The bytes no segment
 * writes are left as they are (create() zeroes them first). Exact: every 16-bit value widens to
 * the float32 it is. */
void cuvil_weights_expand(unsigned char *dst, unsigned char *x, const unsigned char *src, const cuvil_wseg *segs,
                          int64_t n_segs);

/* y = a OP b (CUVIL_BIN_*, broadcast as in cuvil_binary_params; act ignored) for element type
 * t, any but bool. Returns 1 when an integer Div or Mod met a divisor of 0 (the generated code
 * makes that an error from run; ONNX Runtime's too), else 0. Integer division truncates,
 * INT_MIN / -1 is INT_MIN and INT_MIN % -1 is 0 (no trap). Integer pow is cuvil_pow_t's. */
int cuvil_binary_t(const cuvil_binary_params *p, int t, const void *a, const void *b, void *y);
/* y = a ** b for integer type t with an exponent of type te (any numeric type), as ONNX
 * Runtime's Pow computes it: x * x and x * x * x (wrapping) where the exponent is 2 or 3 and one
 * value along the innermost dim while the base is not, else pow((double)x, (double)e) converted
 * to t as cuvil_cast converts a float64 (out of range, inf or NaN: int32's or int64's minimum).
 * A float base (t float32, float64, float16 or bfloat16): pow in double, rounded once to t. */
void cuvil_pow_t(const cuvil_binary_params *p, int t, const void *a, int te, const void *b, void *y);

/* EyeLike: y [rows, cols] of type t, 1 where col - row == k, else 0. */
void cuvil_eyelike_t(int t, int64_t rows, int64_t cols, int64_t k, void *y);
/* ReverseSequence of x (elements of es bytes) viewed as [T, B, inner] (time_first) or [B, T,
 * inner]: for batch item b the first lens[b] steps reversed, the rest copied. Returns 1 when a
 * length is outside 0..T. */
int cuvil_reverse_sequence(size_t es, int time_first, int64_t T, int64_t B, int64_t inner, const int64_t *lens,
                           const void *x, void *y);

/* HannWindow (kind 0), HammingWindow (1), BlackmanWindow (2) of the length read from size (an
 * integer of type st) into y of type t, as ONNX's reference computes them; the length into
 * *n_out. Returns 1 when it is negative or over hi. */
int cuvil_window_t(int kind, int periodic, int t, int st, const void *size, int64_t hi, int64_t *n_out, void *y);

/* ===== Quantization (ONNX's QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
 * MatMulInteger, QLinearMatMul), as ONNX's reference computes them ===================== */
/* x viewed as [outer, len, inner] around the quantization axis; the scale (and zero point) of an
 * element: mode 0 the one (per tensor), 1 scale[l] (per axis), 2 scale[(o * ceil(len / block) +
 * l / block) * inner + i] (blocked). */
typedef struct cuvil_quant_params {
    int64_t outer, len, inner, block;
    int mode;
    int saturate;   /* (integers saturate always) */
} cuvil_quant_params;
/* y = (x - zp) * scale, x of type xt (an integer type), scale of st, y of yt (a float type). */
void cuvil_dequantize_t(const cuvil_quant_params *p, int xt, const void *x, int st, const void *scale, const void *zp,
                        int yt, void *y);
/* y = saturate(rint(x / scale) + zp) (rint: half to even), x and scale of float types xt, st,
 * y and zp of the integer type yt. */
void cuvil_quantize_t(const cuvil_quant_params *p, int xt, const void *x, int st, const void *scale, const void *zp,
                      int yt, void *y);
/* DynamicQuantizeLinear of n float32: y uint8, its scale (float32) and zero point (uint8). */
void cuvil_dynamic_quantize(int64_t n, const float *x, uint8_t *y, float *scale, uint8_t *zp);
/* Integer matmuls over batch items: a [batch, M, K] and b [batch, K, N] (a_bs or b_bs 0: one
 * shared), elements of types at and bt (8/16/32-bit integers); the zero points: NULL (0), one
 * (az_n 1) or per row of a (M) / per column of b (N). MatMulInteger: y int32 [batch, M, N].
 * QLinearMatMul: y of the zero point's type yt, rint(acc * (a_scale * b_scale / y_scale)) + y_zp
 * saturated, the scales float32 or float16 (sst), b's per column when b_sn is N. */
void cuvil_matmul_integer(int64_t batch, int64_t M, int64_t N, int64_t K, int at, const void *a, int64_t a_bs, int bt,
                          const void *b, int64_t b_bs, const void *azp, int64_t az_n, const void *bzp, int64_t bz_n,
                          int32_t *y);
void cuvil_qlinear_matmul(int64_t batch, int64_t M, int64_t N, int64_t K, int at, const void *a, int64_t a_bs, int bt,
                          const void *b, int64_t b_bs, const void *azp, int64_t az_n, const void *bzp, int64_t bz_n,
                          int sst, const void *a_scale, const void *b_scale, int64_t b_sn, const void *y_scale, int yt,
                          const void *yzp, void *y);

/* QLinearAdd as ONNX Runtime computes it, in y's units: y = clamp(rint((a - za) (as / ys) + (b -
 * zb) (bs / ys)) + yz, lo, hi) over n elements, a, b, y uint8 or int8 (at, bt, yt), the zero
 * points NULL (0) or one value of their tensor's type, lo..hi within yt's range. */
void cuvil_qadd(int64_t n, int at, const void *a, const float *as, const void *az, int bt, const void *b, const float *bs,
                const void *bz, const float *ys, int yt, const void *yz, int32_t lo, int32_t hi, void *y);

/* ===== Integer GEMM (runtime/kernels/gemm/qgemm*.c) ==================================
 * y[m, n] = epilogue(sum_k (A[m, k] - za) (B[k, n] - zb)) with A and B int8 or uint8 (any mix),
 * the zero points one value or one per row of A (za) / column of B (zb), accumulated exactly in
 * int32 (wrapping as int32 arithmetic does; the requantizing and float epilogues are exact for
 * K <= CUVIL_QGEMM_K_EXACT). Inside, A is taken as uint8 (int8 + 128) and B as int8 (uint8 -
 * 128), the zero points moved to match, and the row and column sums correct the product: one
 * microkernel serves every mix. The microkernel is the best this CPU runs, asked once: AVX-512
 * VNNI (vpdpbusd), AVX-512 BW (vpmaddwd on 16-bit values), AVX-VNNI, AVX2 (vpmaddwd) or portable
 * C, each exact (no vpmaddubsw: its 16-bit sums saturate on ordinary weights).
 * B packed: 16-column panels of K rounded up to 4, each (4 k x 16 columns) group 64 bytes, the
 * 4 bytes of one column together; the column sums in front. The layout is the same for every
 * microkernel, so weights packed when the model compiles serve any CPU. */
#define CUVIL_QGEMM_K_EXACT 33025   /* 33025 * 255 * 255 < 2^31 */
enum { CUVIL_QEPI_I32 = 0, CUVIL_QEPI_REQUANT = 1, CUVIL_QEPI_F32 = 2 };
enum { CUVIL_QPER_ONE = 0, CUVIL_QPER_ROW = 1, CUVIL_QPER_COL = 2 };
typedef struct cuvil_qgemm_epi {
    int kind;                   /* CUVIL_QEPI_*: I32 y int32 = acc; REQUANT y of yt =
                                 * clamp(rint((acc + ibias) * scale) + yzp, lo, hi) (rint: half
                                 * to even); F32 y float = (acc + ibias) * scale + fbias */
    int yt;                     /* REQUANT: CUVIL_T_U8 or CUVIL_T_I8 */
    const float *scale;         /* REQUANT, F32 */
    int scale_per;              /* CUVIL_QPER_* */
    const int32_t *ibias;       /* REQUANT, F32: NULL or added to acc */
    const float *fbias;         /* F32: NULL or added */
    int bias_per;               /* CUVIL_QPER_* */
    int32_t yzp, lo, hi;        /* REQUANT: lo..hi within yt's range (a fused Relu raises lo) */
    void *y;
    int64_t ldy;                /* y[m * ldy + n] */
} cuvil_qgemm_epi;
size_t cuvil_qgemm_packed_b_bytes(int64_t K, int64_t N);
/* Packs B (bt CUVIL_T_U8 or CUVIL_T_I8), element (k, n) at B[k * sk + n * sn]. */
void cuvil_qgemm_pack_b(int64_t K, int64_t N, int bt, const void *B, int64_t sk, int64_t sn, void *dst);
/* Pair-split packing, for CPUs without an 8-bit dot product (VNNI): B' (B as int8, qgemm.c)
 * packed so that no pair of k (0-1 and 2-3 of each group of 4) in a column has products that
 * can leave int16 for any uint8 A' (its positive values sum to at most 128, its negative ones
 * to at least -128), what is taken off kept as a list of corrections added to the int32 sums.
 * cuvil_qgemm_pair_excess counts the pairs that need one; the layout takes
 * cuvil_qgemm_packed_b_split_bytes(K, N, that count) and reads like cuvil_qgemm_pack_b's
 * everywhere a packed B goes, exactly. */
int64_t cuvil_qgemm_pair_excess(int64_t K, int64_t N, int bt, const void *B, int64_t sk, int64_t sn);
/* The most corrections worth a split (1 pair in 256: each costs a multiply-add per row done one
 * at a time; vpmaddubsw saves ~1/5 of the rest). */
int64_t cuvil_qgemm_split_cap(int64_t K, int64_t N);
size_t cuvil_qgemm_packed_b_split_bytes(int64_t K, int64_t N, int64_t excess);
void cuvil_qgemm_pack_b_split(int64_t K, int64_t N, int bt, const void *B, int64_t sk, int64_t sn, void *dst);
size_t cuvil_qgemm_packed_a_bytes(int64_t M, int64_t K);
/* Packs A (at), row-major with row stride lda. */
void cuvil_qgemm_pack_a(int64_t M, int64_t K, int at, const void *A, int64_t lda, void *dst);
/* Scratch per thread for cuvil_qgemm (a_packed, b_packed: the operand comes packed, else it is
 * packed each call). */
size_t cuvil_qgemm_scratch_size(int64_t M, int64_t N, int64_t K, int a_packed, int b_packed);
/* A (at) row-major with row stride lda, or packed (Ap, A ignored); B likewise: raw (row-major
 * K x N, row stride ldb) or packed (Bp); azp of type at (az_n 0: none, 1, or M), bzp of type bt
 * (bz_n 0, 1 or N). */
void cuvil_qgemm(int64_t M, int64_t N, int64_t K, int at, const void *A, int64_t lda, const void *Ap, int bt, const void *B,
                 int64_t ldb, const void *Bp, const void *azp, int64_t az_n, const void *bzp, int64_t bz_n,
                 const cuvil_qgemm_epi *e, void *scratch);

/* The requantizing multiplier of QLinearConv / QLinearMatMul, as ONNX's reference rounds it:
 * out[i] = float(x_scale * w_scale[i]) / y_scale (ys NULL: the product alone), w_scale one
 * value (ws_n 1) or n. */
void cuvil_qscale(int64_t n, const float *xs, const float *ws, int64_t ws_n, const float *ys, float *out);

/* Integer convolution (ConvInteger, QLinearConv): for each image and group, the weights (A:
 * M/g x C/g*KH*KW, int8 or uint8, packed when the model compiles by cuvil_qconv_pack_w, one
 * zero point or one per output channel) times the patches of x (B, packed each call with x's
 * zero point where the window leaves the image), y NCHW through the epilogue, whose per-row
 * scale, bias and the weights' zero points are per output channel (the pointers offset by the
 * group's first channel). p->act and p->packed_* are unused. */
size_t cuvil_qconv_packed_w_bytes(const cuvil_conv2d_params *p);
void cuvil_qconv_pack_w(const cuvil_conv2d_params *p, int wt, const void *w, void *dst);
size_t cuvil_qconv_scratch_size(const cuvil_conv2d_params *p);
void cuvil_qconv(const cuvil_conv2d_params *p, int xt, const void *x, const void *xzp, const void *wp, const void *wzp,
                 int64_t wz_n, const cuvil_qgemm_epi *e, void *scratch);

/* Comparisons into bool bytes (0/1): p->op is one of these. */
enum { CUVIL_CMP_EQ = 0, CUVIL_CMP_LT, CUVIL_CMP_GT, CUVIL_CMP_LE, CUVIL_CMP_GE };
void cuvil_compare_t(const cuvil_binary_params *p, int t, const void *a, const void *b, uint8_t *y);
/* Logic on bool bytes: p->op is one of these. */
enum { CUVIL_LOGIC_AND = 0, CUVIL_LOGIC_OR, CUVIL_LOGIC_XOR };
void cuvil_logic(const cuvil_binary_params *p, const uint8_t *a, const uint8_t *b, uint8_t *y);
void cuvil_not(const uint8_t *x, uint8_t *y, int64_t n);

/* Unary ops and activations (cuvil_act) for float64 (in double), float16 and bfloat16 (in
 * float32), and for integers: NEG, ABS, RELU (wrapping: abs(INT_MIN) = INT_MIN). */
void cuvil_unary_t(const cuvil_act_params *a, int t, const void *x, void *y, int64_t n);

/* y = x converted from type `from` to `to`, n elements, as ONNX Runtime converts on x86-64:
 * float to integer truncates toward zero; a value out of range (or NaN) becomes int32's minimum
 * for int32 and the narrower types, which keep its low bits, int64's for int64; uint64 takes
 * [0, 2^64) exactly, negatives as int64 and NaN as 2^63, 2^64 and above as 0; uint32 is the
 * low bits of the int64 conversion from float16, and from the other float types x < 2^31 as
 * int32, else x - 2^31 as int32 plus 2^31 (typed.c has the table). Integers narrow by keeping
 * low bits; to bool is x != 0; to float rounds to nearest (to float16/bfloat16 through
 * float32). No C conversion of a value out of range (undefined behaviour) is made. */
void cuvil_cast(int from, int to, const void *x, void *y, int64_t n);

/* out = cond ? x : y with three-way broadcasting; elements of elem_size bytes. */
typedef struct cuvil_where_params {
    int ndim;
    int64_t elem_size;
    int64_t dims[CUVIL_RT_MAX_DIMS];
    int64_t c_strides[CUVIL_RT_MAX_DIMS];
    int64_t x_strides[CUVIL_RT_MAX_DIMS];
    int64_t y_strides[CUVIL_RT_MAX_DIMS];
} cuvil_where_params;

void cuvil_where(const cuvil_where_params *p, const uint8_t *c, const void *x, const void *y, void *out);

/* y[i] = x[broadcast source of i]: Expand (x_strides 0 on broadcast dims) and Tile (x_dims
 * smaller than dims: the source index is i mod x_dims). Elements of elem_size bytes. */
typedef struct cuvil_bcast_copy_params {
    int ndim;
    int64_t elem_size;
    int64_t dims[CUVIL_RT_MAX_DIMS];      /* output */
    int64_t x_dims[CUVIL_RT_MAX_DIMS];    /* input, same rank: 1 (broadcast) or a divisor (tile) */
} cuvil_bcast_copy_params;

void cuvil_bcast_copy(const cuvil_bcast_copy_params *p, const void *x, void *y);

/* Range: y[i] = start + i * delta for i < n (start and delta: one element of type t; for
 * floats computed in double and rounded once, for integers wrapping). */
void cuvil_range_t(int t, const void *start, const void *delta, void *y, int64_t n);
/* Range's element count max(ceil((limit - start) / delta), 0) (the compiler's rule), or -1
 * when delta is 0, the count is not a number or it is over cap (the room planned for it). */
int64_t cuvil_range_count_t(int t, const void *start, const void *limit, const void *delta, int64_t cap);

/* Trilu: batch matrices [rows, cols] of elem_size-byte elements; y keeps x[i][j] where
 * j - i >= k (upper) or j - i <= k (lower) and is zero elsewhere, k being *k_rt when given
 * (computed at run time), else p->k. y may equal x. */
typedef struct cuvil_trilu_params {
    int64_t batch, rows, cols, k, elem_size;
    int upper;
} cuvil_trilu_params;

void cuvil_trilu(const cuvil_trilu_params *p, const int64_t *k_rt, const void *x, void *y);

/* CumSum: x viewed as [outer, len, inner], running sums along len (from the end when
 * reverse; exclusive: the sum of the elements before, 0 first), accumulated in the element
 * type (float16/bfloat16 in float32, integers wrapping). t: float32/64, float16, bfloat16,
 * int32/64, uint32/64. */
typedef struct cuvil_cumsum_params {
    int64_t outer, len, inner;
    int exclusive, reverse;
    int prod;   /* CumProd: running products (exclusive: 1 first) */
} cuvil_cumsum_params;

void cuvil_cumsum_t(const cuvil_cumsum_params *p, int t, const void *x, void *y);
/* The same with the axis read when the model runs (axis_t: CUVIL_T_I32 or CUVIL_T_I64, negative
 * counting from the end) for x of rank ndim and dims; p's layout is ignored. Returns 1 when the
 * axis is out of range (y untouched). */
int cuvil_cumsum_rt(const cuvil_cumsum_params *p, int ndim, const int64_t *dims, int axis_t, const void *axis, int t,
                    const void *x, void *y);

/* Clip: y = min(max(x, *lo), *hi) for n elements of type t (any numeric type; lo and hi of the
 * same type, NULL for no bound); NaN stays NaN. */
void cuvil_clip_t(int t, const void *x, const void *lo, const void *hi, void *y, int64_t n);

/* TopK: x viewed as [outer, len, inner]; along len, the k largest (or smallest) elements in
 * order, ties by the lower index, into y and their indices into idx ([outer, k, inner]); NaN
 * counts as the largest. t: float32/64, float16, bfloat16, int32/64. scratch: one row's
 * candidates, cuvil_topk_scratch_size() bytes. */
typedef struct cuvil_topk_params {
    int64_t outer, len, inner, k;
    int largest;
} cuvil_topk_params;

size_t cuvil_topk_scratch_size(const cuvil_topk_params *p);
void cuvil_topk_t(const cuvil_topk_params *p, int t, const void *x, void *y, int64_t *idx, void *scratch);

/* IsNaN / IsInf: y[i] = 1 if x[i] (float type t) is in one of the classes of mask. */
enum { CUVIL_CLASS_NAN = 1, CUVIL_CLASS_POS_INF = 2, CUVIL_CLASS_NEG_INF = 4 };
void cuvil_float_class_t(int t, int mask, const void *x, uint8_t *y, int64_t n);

/* ConstantOfShape: n copies of the elem_size bytes at value. */
void cuvil_fill(const void *value, int64_t elem_size, void *y, int64_t n);

/* ArgMax/ArgMin over the middle axis of x viewed as [outer, axis_len, inner]: y (int64,
 * [outer, inner]) gets the first (or with select_last the last) index of the extreme value;
 * NaN counts as the extreme, as in numpy. */
typedef struct cuvil_arg_params {
    int64_t outer, axis_len, inner;
    int is_min, select_last;
} cuvil_arg_params;

void cuvil_argmax_t(const cuvil_arg_params *p, int t, const void *x, int64_t *y);

/* Gather along an axis with indices computed at run time (int32 or int64 by idx_t: CUVIL_T_I32
 * or CUVIL_T_I64), negative ones counting from the end. Returns 0, or 1 when an index is out
 * of range (y is then partly written). */
int cuvil_gather_rt(const cuvil_gather_params *p, int idx_t, const void *idx, const void *x, void *y);
/* The same from a float32 table stored in 16 bits, as cuvil_gather_w16. */
int cuvil_gather_w16_rt(const cuvil_gather_params *p, int kind, int idx_t, const void *idx, const uint16_t *x, float *y);

/* GatherElements / ScatterElements along `axis`: idx and upd have shape dims, data has
 * data_dims (same rank). Scatter copies data to y first (y may equal data) then writes or
 * reduces (CUVIL_SCATTER_*; reductions need the element type t). Return 1 when an index is
 * out of range. */
enum { CUVIL_SCATTER_NONE = 0, CUVIL_SCATTER_ADD, CUVIL_SCATTER_MUL, CUVIL_SCATTER_MAX, CUVIL_SCATTER_MIN };
typedef struct cuvil_elements_params {
    int ndim, axis, reduction;
    int64_t elem_size;
    int64_t dims[CUVIL_RT_MAX_DIMS];
    int64_t data_dims[CUVIL_RT_MAX_DIMS];
} cuvil_elements_params;

int cuvil_gather_elements(const cuvil_elements_params *p, int idx_t, const void *idx, const void *x, void *y);

/* NonZero: the indices of the non-zero elements of x (ndim >= 1 dims, element type t; -0.0 is
 * zero, NaN is not), in row-major order, as y[d * count + i] = the i-th one's index along dim
 * d; y has room for ndim * numel(x). Returns count. */
int64_t cuvil_nonzero(int t, const void *x, int ndim, const int64_t *dims, int64_t *y);
/* How many of the n elements of x (type t) are non-zero, as cuvil_nonzero counts them. */
int64_t cuvil_nonzero_count(int t, const void *x, int64_t n);

/* ===== Sequences of tensors (src/ir/ops/op_seq.c) ===================================== */
/* A sequence is one block: int64 header [count, then each element's `rank` dims], hdr bytes,
 * then cap slots of slot bytes (an element's data at hdr + i * slot, dense row-major). The
 * element size is esize. Positions (pos_t: 0 none, CUVIL_T_I32 or CUVIL_T_I64; pos a pointer
 * to the one value) count from the end when negative. Each returns 1, writing nothing
 * usable, when a position is out of range or the data breaks the op's rules (below). */
typedef struct cuvil_seq_params {
    int64_t cap;     /* slots */
    int rank;
    int64_t hdr, slot, esize;
} cuvil_seq_params;

/* Element i's dims (p->rank of them) in sequence S. */
static inline int64_t *cuvil_seq_dims(const cuvil_seq_params *p, void *S, int64_t i) {
    return (int64_t *)S + 1 + i * p->rank;
}
/* O holds element i = x (dims xd), the count set to n. */
void cuvil_seq_put(const cuvil_seq_params *p, void *O, int64_t n, int64_t i, const void *x, const int64_t *xd);
/* O (params po) = S (pi) with x (dims xd) inserted before pos (default: the end), in -n..n. */
int cuvil_seq_insert(const cuvil_seq_params *pi, const void *S, const cuvil_seq_params *po, void *O, const void *x,
                     const int64_t *xd, int pos_t, const void *pos);
/* O = S without the element at pos (default: the last), in -n..n-1. */
int cuvil_seq_erase(const cuvil_seq_params *pi, const void *S, const cuvil_seq_params *po, void *O, int pos_t,
                    const void *pos);
/* y = a copy of the element at pos (in -n..n-1), its dims into yd; 1 (nothing copied) where a
 * dim is over ycap's (the room planned for y). */
int cuvil_seq_at(const cuvil_seq_params *p, const void *S, int pos_t, const void *pos, void *y, int64_t *yd,
                 const int64_t *ycap);
/* O = x (dims xd, rank r) cut along axis into n pieces: lens[i] (from split, type split_t, n
 * values, when lens is NULL; each >= 0, summing to the axis's length), without the axis when
 * drop (pieces of 1). */
int cuvil_seq_split(const cuvil_seq_params *po, void *O, const void *x, const int64_t *xd, int r, int axis, int64_t n,
                    const int64_t *lens, int split_t, const void *split, int drop);
/* O (params po) = S (pi), its elements into O's slots; 1 (nothing usable) where S holds more
 * than po->cap or an element has more bytes than po->slot. */
int cuvil_seq_copy(const cuvil_seq_params *pi, const void *S, const cuvil_seq_params *po, void *O);
/* O (po) = A's elements (pa), then B's (pb); 1 where they are more than po->cap. */
int cuvil_seq_join(const cuvil_seq_params *pa, const void *A, const cuvil_seq_params *pb, const void *B,
                   const cuvil_seq_params *po, void *O);
/* y = S's elements joined along axis (stack: on a new axis there); every other dim must
 * agree; yd gets y's dims; 1 (nothing copied) where a dim of y is over ycap's. */
int cuvil_seq_concat(const cuvil_seq_params *p, const void *S, int axis, int stack, void *y, int64_t *yd,
                     const int64_t *ycap);

/* OneHot: indices idx (numeric type t; a float truncated) viewed as [outer, inner]; y [outer,
 * depth, inner] of es-byte elements gets values[1] (on) where the index (negative ones from
 * -depth counting from the end) equals the position along depth, else values[0] (off): an
 * index outside [-depth, depth) gives a row of off. cuvil_onehot_depth_t: the depth from its
 * one-element tensor, or -1 when it is under 1 (ONNX Runtime's rule) or over cap (the room
 * planned for it). */
void cuvil_onehot_t(int t, const void *idx, int64_t outer, int64_t depth, int64_t inner, const void *values, int64_t es,
                    void *y);
int64_t cuvil_onehot_depth_t(int t, const void *depth, int64_t cap);

/* Unique: x (type t, es-byte elements) viewed as [outer, n, inner]; the distinct slices x[:, j,
 * :] (compared element by element, NaN equal to NaN and after every number), sorted ascending
 * or (sorted 0) in order of first occurrence, into y [outer, count, inner]; idx[count] their
 * first occurrences, inv[n] each slice's position in y, cnt[count] how many each has (any of
 * y, idx, inv, cnt NULL: not written). Returns count, or -1 (nothing written) when it is over
 * cap, the room planned. scratch: cuvil_unique_scratch_size(n). */
size_t cuvil_unique_scratch_size(int64_t n);
int64_t cuvil_unique_t(int t, int64_t es, const void *x, int64_t outer, int64_t n, int64_t inner, int sorted, void *y,
                       int64_t *idx, int64_t *inv, int64_t *cnt, int64_t cap, void *scratch);

/* NonMaxSuppression: boxes [nb, n, 4] (center: [x_center, y_center, width, height]; else two
 * corners [y1, x1, y2, x2]), scores [nb, nc, n]; into y [count, 3] (batch, class, box) the
 * boxes ONNX Runtime selects: per batch and class by score (ties: the lower index first),
 * score > *score_threshold when given, IoU with a kept box at most *iou_threshold (0 when
 * NULL), at most *max_per_class (none when NULL or <= 0). Returns count, or -1 when the IoU
 * threshold is outside [0, 1] or count would pass cap. scratch: cuvil_nms_scratch_size(n). */
size_t cuvil_nms_scratch_size(int64_t n);
int64_t cuvil_nms(const float *boxes, const float *scores, int64_t nb, int64_t nc, int64_t n, const int64_t *max_per_class,
                  const float *iou_threshold, const float *score_threshold, int center, int64_t *y, int64_t cap,
                  void *scratch);

/* Compress: x viewed as [outer, axis_len, inner_bytes]; y gets the rows j < min(cond_len,
 * axis_len) of each outer block where cond[j] is non-zero, in order. Returns their count. */
int64_t cuvil_compress(const void *x, const uint8_t *cond, int64_t outer, int64_t axis_len, int64_t cond_len,
                       int64_t inner_bytes, void *y);
int cuvil_scatter_elements(const cuvil_elements_params *p, int t, int idx_t, const void *idx, const void *upd,
                           const void *data, void *y);

/* GatherND / ScatterND: idx is [n_batch, n_idx, k] (batch_dims flattened into n_batch), each
 * k-tuple addresses a slice of slice_elems elements in data viewed as [n_batch, data_dims...];
 * data_dims lists the k indexed dims. Scatter copies data into y, then writes or reduces
 * upd [n_batch, n_idx, slice] into it. Return 1 when an index is out of range. */
typedef struct cuvil_nd_params {
    int64_t n_batch, n_idx, k, slice_elems, elem_size;
    int reduction;
    int64_t data_dims[CUVIL_RT_MAX_DIMS];
} cuvil_nd_params;

int cuvil_gather_nd(const cuvil_nd_params *p, const int64_t *idx, const void *x, void *y);
int cuvil_scatter_nd(const cuvil_nd_params *p, int t, const int64_t *idx, const void *upd, const void *data, void *y);

/* ===== Resize ====================================================================== */
enum { CUVIL_RESIZE_NEAREST = 0, CUVIL_RESIZE_LINEAR, CUVIL_RESIZE_CUBIC };
/* keep in ORDER with the coordinate_transformation_mode names of src/ir/ops/op_resize.c */
enum {
    CUVIL_COORD_HALF_PIXEL = 0, CUVIL_COORD_ASYMMETRIC, CUVIL_COORD_ALIGN_CORNERS,
    CUVIL_COORD_PYTORCH_HALF_PIXEL, CUVIL_COORD_TF_HALF_PIXEL_FOR_NN,
    CUVIL_COORD_HALF_PIXEL_SYMMETRIC, CUVIL_COORD_TF_CROP_AND_RESIZE
};
enum {
    CUVIL_NEAREST_ROUND_PREFER_FLOOR = 0, CUVIL_NEAREST_ROUND_PREFER_CEIL, CUVIL_NEAREST_FLOOR,
    CUVIL_NEAREST_CEIL
};

/* ONNX Resize (opset 11+ semantics; the compiler maps Upsample and opset-10 Resize onto it).
 * For each axis d: x_orig = transform(y_index, scales[d], in_dims[d], out_dims[d]) and the
 * value is interpolated along every axis whose in/out sizes or scale differ (n-linear for
 * LINEAR, cubic with cubic_coeff_a / exclude_outside for CUBIC). scales[d] <= 0 means
 * "out_dims[d] / in_dims[d]" (what ONNX uses when the model gives sizes, not scales).
 * Coordinates are computed in float as ONNX Runtime does, so ties round as it does.
 * tf_crop_and_resize, antialias and keep_aspect_ratio_policy are not supported. */
typedef struct cuvil_resize_params {
    int mode, coord_mode, nearest_mode;
    int ndim;
    int64_t in_dims[CUVIL_RT_MAX_DIMS];
    int64_t out_dims[CUVIL_RT_MAX_DIMS];
    float scales[CUVIL_RT_MAX_DIMS];
    float cubic_coeff_a;
    int exclude_outside;
    /* CUVIL_COORD_TF_CROP_AND_RESIZE: the region of interest along each axis (fractions of
     * in - 1), and the value of an output whose source coordinate falls outside the input */
    float roi_lo[CUVIL_RT_MAX_DIMS], roi_hi[CUVIL_RT_MAX_DIMS];
    float extrapolation_value;
} cuvil_resize_params;

void cuvil_f32_resize(const cuvil_resize_params *p, const float *x, float *y);
/* The output dims and scales of p along axes[0..nax) from scales (float32) or sizes (int64)
 * read when the model runs, by op_resize_params' rules (keep_aspect: keep_aspect_ratio_policy
 * 1 not_larger, 2 not_smaller, on sizes; roi, NULL or 2 * nax float32 read then: the region of
 * interest): 1 when one is not valid (a scale not a positive number, an empty axis) or a dim
 * is over hi[i] (the room planned), else 0. */
int cuvil_resize_rt(cuvil_resize_params *p, int nax, const int *axes, const float *scales, const int64_t *sizes,
                    const int64_t *hi, int keep_aspect, const float *roi);

#ifdef __cplusplus
}
#endif
#endif /* CUVIL_RT_H */
