#include "textflag.h"
#include "go_asm.h"

// init_by_array (mt19937ar.c) for many lanes at once; see seed.go. The state
// is lane-interleaved: word i of lane c sits at st + i*ROW + 4*c. One vector
// register holds one word of 16 (zmm) or 8 (ymm) lanes, one chain, and
// sixteen (zmm) or eight (ymm) registers run independent chains side by side
// so that their steps, each five dependent operations, overlap.
//
// First loop, step t = i-1 for i = 1..623, then the wrap step:
//   p = (base[i] ^ (p ^ p>>30)*1664525) + key[t&1]; st[i] = p
//   st[0] = p; p = (st[1] ^ (p ^ p>>30)*1664525) + key[1]; st[1] = p
// Second loop, i = 2..623, then the wrap to word 1:
//   p = (st[i] ^ (p ^ p>>30)*1566083941) - i; st[i] = p
//   st[1] = (st[1] ^ (p ^ p>>30)*1566083941) - 1; st[0] = 0x80000000

#define ROW (const_BatchLanes*4)

// ---------------------------------------------------------------- AVX-512
// Z0-Z15 chains (256 lanes), keys read from memory (DX), Z16 scratch, Z28
// base[i] or upper mask, Z29 ones, Z30 i, Z31 multiplier. Sixteen chains:
// one step is five dependent 2- or 3-cycle operations (11 cycles on Zen 5),
// and sixteen registers of work cover that latency at the issue rate.

// K1Z: one first-loop step of chain P:
// P = (Z28 ^ (P ^ P>>30)*Z31) + KOFF(DX), stored at OFF(DI).
#define K1Z(P, KOFF, OFF) \
	VPSRLD    $30, P, Z16 \
	VPXORD    Z16, P, P   \
	VPMULLD   Z31, P, P   \
	VPXORD    Z28, P, P   \
	VPADDD    KOFF(DX), P, P \
	VMOVDQU32 P, OFF(DI)

// K1MZ: the first-loop wrap step, xoring the word at OFF(DI), not Z28.
#define K1MZ(P, KOFF, OFF) \
	VPSRLD    $30, P, Z16 \
	VPXORD    Z16, P, P   \
	VPMULLD   Z31, P, P   \
	VPXORD    OFF(DI), P, P \
	VPADDD    KOFF(DX), P, P \
	VMOVDQU32 P, OFF(DI)

// K2Z: one second-loop step: P = (OFF(DI) ^ (P ^ P>>30)*Z31) - I.
#define K2Z(P, I, OFF) \
	VPSRLD    $30, P, Z16 \
	VPXORD    Z16, P, P   \
	VPMULLD   Z31, P, P   \
	VPXORD    OFF(DI), P, P \
	VPSUBD    I, P, P     \
	VMOVDQU32 P, OFF(DI)

#define STEP1Z(K, R) \
	K1Z(Z0, K+0, R+0) \
	K1Z(Z1, K+64, R+64) \
	K1Z(Z2, K+128, R+128) \
	K1Z(Z3, K+192, R+192) \
	K1Z(Z4, K+256, R+256) \
	K1Z(Z5, K+320, R+320) \
	K1Z(Z6, K+384, R+384) \
	K1Z(Z7, K+448, R+448) \
	K1Z(Z8, K+512, R+512) \
	K1Z(Z9, K+576, R+576) \
	K1Z(Z10, K+640, R+640) \
	K1Z(Z11, K+704, R+704) \
	K1Z(Z12, K+768, R+768) \
	K1Z(Z13, K+832, R+832) \
	K1Z(Z14, K+896, R+896) \
	K1Z(Z15, K+960, R+960)

#define WRAP1Z() \
	K1MZ(Z0, ROW+0, ROW+0) \
	K1MZ(Z1, ROW+64, ROW+64) \
	K1MZ(Z2, ROW+128, ROW+128) \
	K1MZ(Z3, ROW+192, ROW+192) \
	K1MZ(Z4, ROW+256, ROW+256) \
	K1MZ(Z5, ROW+320, ROW+320) \
	K1MZ(Z6, ROW+384, ROW+384) \
	K1MZ(Z7, ROW+448, ROW+448) \
	K1MZ(Z8, ROW+512, ROW+512) \
	K1MZ(Z9, ROW+576, ROW+576) \
	K1MZ(Z10, ROW+640, ROW+640) \
	K1MZ(Z11, ROW+704, ROW+704) \
	K1MZ(Z12, ROW+768, ROW+768) \
	K1MZ(Z13, ROW+832, ROW+832) \
	K1MZ(Z14, ROW+896, ROW+896) \
	K1MZ(Z15, ROW+960, ROW+960)

#define STEP2Z(I, R) \
	K2Z(Z0, I, R+0) \
	K2Z(Z1, I, R+64) \
	K2Z(Z2, I, R+128) \
	K2Z(Z3, I, R+192) \
	K2Z(Z4, I, R+256) \
	K2Z(Z5, I, R+320) \
	K2Z(Z6, I, R+384) \
	K2Z(Z7, I, R+448) \
	K2Z(Z8, I, R+512) \
	K2Z(Z9, I, R+576) \
	K2Z(Z10, I, R+640) \
	K2Z(Z11, I, R+704) \
	K2Z(Z12, I, R+768) \
	K2Z(Z13, I, R+832) \
	K2Z(Z14, I, R+896) \
	K2Z(Z15, I, R+960)

#define STOREZ(R) \
	VMOVDQU32 Z0, R+0(DI) \
	VMOVDQU32 Z1, R+64(DI) \
	VMOVDQU32 Z2, R+128(DI) \
	VMOVDQU32 Z3, R+192(DI) \
	VMOVDQU32 Z4, R+256(DI) \
	VMOVDQU32 Z5, R+320(DI) \
	VMOVDQU32 Z6, R+384(DI) \
	VMOVDQU32 Z7, R+448(DI) \
	VMOVDQU32 Z8, R+512(DI) \
	VMOVDQU32 Z9, R+576(DI) \
	VMOVDQU32 Z10, R+640(DI) \
	VMOVDQU32 Z11, R+704(DI) \
	VMOVDQU32 Z12, R+768(DI) \
	VMOVDQU32 Z13, R+832(DI) \
	VMOVDQU32 Z14, R+896(DI) \
	VMOVDQU32 Z15, R+960(DI)

// func seedAVX512(st *uint32, keys *uint32, base *uint32)
TEXT ·seedAVX512(SB), NOSPLIT, $0-24
	MOVQ st+0(FP), DI
	MOVQ keys+8(FP), DX
	MOVQ base+16(FP), SI

	VPBROADCASTD (SI), Z0
	VMOVDQA32    Z0, Z1
	VMOVDQA32    Z0, Z2
	VMOVDQA32    Z0, Z3
	VMOVDQA32    Z0, Z4
	VMOVDQA32    Z0, Z5
	VMOVDQA32    Z0, Z6
	VMOVDQA32    Z0, Z7
	VMOVDQA32    Z0, Z8
	VMOVDQA32    Z0, Z9
	VMOVDQA32    Z0, Z10
	VMOVDQA32    Z0, Z11
	VMOVDQA32    Z0, Z12
	VMOVDQA32    Z0, Z13
	VMOVDQA32    Z0, Z14
	VMOVDQA32    Z0, Z15
	MOVL         $1664525, AX
	VPBROADCASTD AX, Z31

	// Words 1..622 in pairs: odd i adds key[0], even i key[1].
	ADDQ $4, SI
	ADDQ $ROW, DI
	MOVQ $311, CX

loop1z:
	VPBROADCASTD (SI), Z28
	STEP1Z(0, 0)
	VPBROADCASTD 4(SI), Z28
	STEP1Z(ROW, ROW)
	ADDQ $8, SI
	ADDQ $(2*ROW), DI
	DECQ CX
	JNZ  loop1z

	// Word 623 (step 622, key[0]).
	VPBROADCASTD (SI), Z28
	STEP1Z(0, 0)

	// Wrap: word 0 takes word 623; step 623 (key[1]) rewrites word 1.
	MOVQ st+0(FP), DI
	STOREZ(0)
	WRAP1Z()

	// Second loop over words 2..623; Z30 holds i.
	MOVL         $1566083941, AX
	VPBROADCASTD AX, Z31
	MOVL         $1, AX
	VPBROADCASTD AX, Z29
	VPADDD       Z29, Z29, Z30
	ADDQ         $(2*ROW), DI
	MOVQ         $622, CX

loop2z:
	STEP2Z(Z30, 0)
	VPADDD Z29, Z30, Z30
	ADDQ   $ROW, DI
	DECQ   CX
	JNZ    loop2z

	// Wrap to word 1 (i = 1), then word 0 = 0x80000000.
	MOVQ st+0(FP), DI
	STEP2Z(Z29, ROW)
	MOVL         $0x80000000, AX
	VPBROADCASTD AX, Z0
	VMOVDQA32    Z0, Z1
	VMOVDQA32    Z0, Z2
	VMOVDQA32    Z0, Z3
	VMOVDQA32    Z0, Z4
	VMOVDQA32    Z0, Z5
	VMOVDQA32    Z0, Z6
	VMOVDQA32    Z0, Z7
	VMOVDQA32    Z0, Z8
	VMOVDQA32    Z0, Z9
	VMOVDQA32    Z0, Z10
	VMOVDQA32    Z0, Z11
	VMOVDQA32    Z0, Z12
	VMOVDQA32    Z0, Z13
	VMOVDQA32    Z0, Z14
	VMOVDQA32    Z0, Z15
	STOREZ(0)
	VZEROUPPER
	RET

// ------------------------------------------------------------------- AVX2
// Y0-Y7 chains, keys read from memory (DX), Y8 scratch, Y12 ones, Y13 i,
// Y14 base[i] or upper mask, Y15 multiplier.

#define K1Y(P, KOFF, OFF) \
	VPSRLD  $30, P, Y8  \
	VPXOR   Y8, P, P    \
	VPMULLD Y15, P, P   \
	VPXOR   Y14, P, P   \
	VPADDD  KOFF(DX), P, P \
	VMOVDQU P, OFF(DI)

#define K1MY(P, KOFF, OFF) \
	VPSRLD  $30, P, Y8  \
	VPXOR   Y8, P, P    \
	VPMULLD Y15, P, P   \
	VPXOR   OFF(DI), P, P \
	VPADDD  KOFF(DX), P, P \
	VMOVDQU P, OFF(DI)

#define K2Y(P, I, OFF) \
	VPSRLD  $30, P, Y8  \
	VPXOR   Y8, P, P    \
	VPMULLD Y15, P, P   \
	VPXOR   OFF(DI), P, P \
	VPSUBD  I, P, P     \
	VMOVDQU P, OFF(DI)

#define STEP1Y(K, R) \
	K1Y(Y0, K+0, R+0)     \
	K1Y(Y1, K+32, R+32)   \
	K1Y(Y2, K+64, R+64)   \
	K1Y(Y3, K+96, R+96)   \
	K1Y(Y4, K+128, R+128) \
	K1Y(Y5, K+160, R+160) \
	K1Y(Y6, K+192, R+192) \
	K1Y(Y7, K+224, R+224)

#define STEP2Y(I, R) \
	K2Y(Y0, I, R+0)     \
	K2Y(Y1, I, R+32)    \
	K2Y(Y2, I, R+64)    \
	K2Y(Y3, I, R+96)    \
	K2Y(Y4, I, R+128)   \
	K2Y(Y5, I, R+160)   \
	K2Y(Y6, I, R+192)   \
	K2Y(Y7, I, R+224)

// func seedAVX2(st *uint32, keys *uint32, base *uint32)
TEXT ·seedAVX2(SB), NOSPLIT, $0-24
	MOVQ st+0(FP), DI
	MOVQ keys+8(FP), DX
	MOVQ base+16(FP), SI

	VPBROADCASTD (SI), Y0
	VMOVDQA      Y0, Y1
	VMOVDQA      Y0, Y2
	VMOVDQA      Y0, Y3
	VMOVDQA      Y0, Y4
	VMOVDQA      Y0, Y5
	VMOVDQA      Y0, Y6
	VMOVDQA      Y0, Y7
	MOVL         $1664525, AX
	MOVL         AX, X15
	VPBROADCASTD X15, Y15

	ADDQ $4, SI
	ADDQ $ROW, DI
	MOVQ $311, CX

loop1y:
	VPBROADCASTD (SI), Y14
	STEP1Y(0, 0)
	VPBROADCASTD 4(SI), Y14
	STEP1Y(ROW, ROW)
	ADDQ $8, SI
	ADDQ $(2*ROW), DI
	DECQ CX
	JNZ  loop1y

	VPBROADCASTD (SI), Y14
	STEP1Y(0, 0)

	MOVQ    st+0(FP), DI
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	VMOVDQU Y4, 128(DI)
	VMOVDQU Y5, 160(DI)
	VMOVDQU Y6, 192(DI)
	VMOVDQU Y7, 224(DI)
	K1MY(Y0, ROW+0, ROW+0)
	K1MY(Y1, ROW+32, ROW+32)
	K1MY(Y2, ROW+64, ROW+64)
	K1MY(Y3, ROW+96, ROW+96)
	K1MY(Y4, ROW+128, ROW+128)
	K1MY(Y5, ROW+160, ROW+160)
	K1MY(Y6, ROW+192, ROW+192)
	K1MY(Y7, ROW+224, ROW+224)

	MOVL         $1566083941, AX
	MOVL         AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $1, AX
	MOVL         AX, X12
	VPBROADCASTD X12, Y12
	VPADDD       Y12, Y12, Y13
	ADDQ         $(2*ROW), DI
	MOVQ         $622, CX

loop2y:
	STEP2Y(Y13, 0)
	VPADDD Y12, Y13, Y13
	ADDQ   $ROW, DI
	DECQ   CX
	JNZ    loop2y

	MOVQ st+0(FP), DI
	STEP2Y(Y12, ROW)
	MOVL         $0x80000000, AX
	MOVL         AX, X14
	VPBROADCASTD X14, Y14
	VMOVDQU      Y14, 0(DI)
	VMOVDQU      Y14, 32(DI)
	VMOVDQU      Y14, 64(DI)
	VMOVDQU      Y14, 96(DI)
	VMOVDQU      Y14, 128(DI)
	VMOVDQU      Y14, 160(DI)
	VMOVDQU      Y14, 192(DI)
	VMOVDQU      Y14, 224(DI)
	VZEROUPPER
	RET

// ------------------------------------------------------------ first outputs
// pretwist twists words 0..nPre-1 of every lane as the first nPre calls of
// Lane.Uint32 would, and stores their tempered outputs in out (row stride
// ROW, like st). Row i reads row i+1 before it is twisted and row i+397,
// which these rows never reach.

// func pretwistAVX512(st *uint32, out *uint32)
TEXT ·pretwistAVX512(SB), NOSPLIT, $0-16
	MOVQ         st+0(FP), DI
	MOVQ         out+8(FP), R8
	MOVL         $0x80000000, AX
	VPBROADCASTD AX, Z20
	MOVL         $0x9908b0df, AX
	VPBROADCASTD AX, Z21
	MOVL         $0x9d2c5680, AX
	VPBROADCASTD AX, Z22
	MOVL         $0xefc60000, AX
	VPBROADCASTD AX, Z23
	MOVQ         $const_nPre, CX

rowz:
	XORQ SI, SI

colz:
	VMOVDQU32 (DI)(SI*1), Z0
	VMOVDQU32 ROW(DI)(SI*1), Z1
	// y = upper bit of word i, lower 31 bits of word i+1: Z20 ? Z0 : Z1.
	VPTERNLOGD $0xe4, Z20, Z1, Z0
	// Word i = word i+397 ^ y>>1 ^ (y odd ? 0x9908b0df : 0).
	VPSLLD     $31, Z0, Z2
	VPSRAD     $31, Z2, Z2
	VPANDD     Z21, Z2, Z2
	VPSRLD     $1, Z0, Z0
	VPXORD     Z2, Z0, Z0
	VPXORD     (const_m*ROW)(DI)(SI*1), Z0, Z0
	VMOVDQU32  Z0, (DI)(SI*1)
	// Temper: Z0 ^= Z2 & mask is ternary function 0x78.
	VPSRLD     $11, Z0, Z2
	VPXORD     Z2, Z0, Z0
	VPSLLD     $7, Z0, Z2
	VPTERNLOGD $0x78, Z22, Z2, Z0
	VPSLLD     $15, Z0, Z2
	VPTERNLOGD $0x78, Z23, Z2, Z0
	VPSRLD     $18, Z0, Z2
	VPXORD     Z2, Z0, Z0
	VMOVDQU32  Z0, (R8)(SI*1)
	ADDQ       $64, SI
	CMPQ       SI, $ROW
	JNE        colz

	ADDQ $ROW, DI
	ADDQ $ROW, R8
	DECQ CX
	JNZ  rowz
	VZEROUPPER
	RET

// func pretwistAVX2(st *uint32, out *uint32)
TEXT ·pretwistAVX2(SB), NOSPLIT, $0-16
	MOVQ         st+0(FP), DI
	MOVQ         out+8(FP), R8
	MOVL         $0x80000000, AX
	MOVL         AX, X10
	VPBROADCASTD X10, Y10
	MOVL         $0x9908b0df, AX
	MOVL         AX, X11
	VPBROADCASTD X11, Y11
	MOVL         $0x9d2c5680, AX
	MOVL         AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $0xefc60000, AX
	MOVL         AX, X13
	VPBROADCASTD X13, Y13
	MOVQ         $const_nPre, CX

rowy:
	XORQ SI, SI

coly:
	VMOVDQU (DI)(SI*1), Y0
	VMOVDQU ROW(DI)(SI*1), Y1
	VPAND   Y10, Y0, Y0
	VPANDN  Y1, Y10, Y1
	VPOR    Y1, Y0, Y0
	VPSLLD  $31, Y0, Y2
	VPSRAD  $31, Y2, Y2
	VPAND   Y11, Y2, Y2
	VPSRLD  $1, Y0, Y0
	VPXOR   Y2, Y0, Y0
	VPXOR   (const_m*ROW)(DI)(SI*1), Y0, Y0
	VMOVDQU Y0, (DI)(SI*1)
	VPSRLD  $11, Y0, Y2
	VPXOR   Y2, Y0, Y0
	VPSLLD  $7, Y0, Y2
	VPAND   Y12, Y2, Y2
	VPXOR   Y2, Y0, Y0
	VPSLLD  $15, Y0, Y2
	VPAND   Y13, Y2, Y2
	VPXOR   Y2, Y0, Y0
	VPSRLD  $18, Y0, Y2
	VPXOR   Y2, Y0, Y0
	VMOVDQU Y0, (R8)(SI*1)
	ADDQ    $32, SI
	CMPQ    SI, $ROW
	JNE     coly

	ADDQ $ROW, DI
	ADDQ $ROW, R8
	DECQ CX
	JNZ  rowy
	VZEROUPPER
	RET
