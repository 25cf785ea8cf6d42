/* vexp_consts.h -- the constants of the vector exp (Cephes' single-precision scheme), of
 * Gelu's tanh form and of tanh, shared by unary_avx2.c and unary_avx512.c, whose results must be the same
 * bits: the argument clamps, log2 e, ln 2 in two parts (the first exact in float, so x - n ln 2
 * is exact), and the degree-6 polynomial of exp on the reduced argument, highest power first. */
#ifndef CUVIL_VEXP_CONSTS_H
#define CUVIL_VEXP_CONSTS_H

#define VEXP_HI 89.0f
#define VEXP_LO (-104.0f)
#define VEXP_LOG2E 1.44269504088896341f
#define VEXP_LN2_HI 0.693359375f
#define VEXP_LN2_LO (-2.12194440e-4f)
#define VEXP_P0 1.9875691500E-4f
#define VEXP_P1 1.3981999507E-3f
#define VEXP_P2 8.3334519073E-3f
#define VEXP_P3 4.1665795894E-2f
#define VEXP_P4 1.6666665459E-1f
#define VEXP_P5 5.0000001201E-1f
/* Gelu's tanh form as x sigmoid(2u): -2u = x (C0 + C1 x^2), C0 = -2 sqrt(2/pi), C1 = C0 * 0.044715 */
#define VGELU_TANH_C0 (-1.5957691216057308f)
#define VGELU_TANH_C1 (-0.0713548162726009f)
/* tanh as the rational x P(x^2) / Q(x^2) on x clamped to +-VTANH_CLAMP (there it gives
 * 1 - 2^-22), exactly +-1 from |x| = VTANH_ONE (tanh rounds to 1 in float from about 9.01), x
 * itself below VTANH_TINY: the minimax coefficients Eigen and XLA use, highest power first.
 * Within 4.9 ulp of tanh over every float (2.9e-7 relative; checked by hand against double,
 * results within [-1, 1]). */
#define VTANH_CLAMP 7.90531110763549805f
#define VTANH_ONE 9.1f
#define VTANH_TINY 0.0004f
#define VTANH_P0 (-2.76076847742355e-16f)
#define VTANH_P1 2.00018790482477e-13f
#define VTANH_P2 (-8.60467152213735e-11f)
#define VTANH_P3 5.12229709037114e-08f
#define VTANH_P4 1.48572235717979e-05f
#define VTANH_P5 6.37261928875436e-04f
#define VTANH_P6 4.89352455891786e-03f
#define VTANH_Q0 1.19825839466702e-06f
#define VTANH_Q1 1.18534705686654e-04f
#define VTANH_Q2 2.26843463243900e-03f
#define VTANH_Q3 4.89352518554385e-03f

#endif
