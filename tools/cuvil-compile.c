/* cuvil-compile -- compiles an ONNX model into a shared library (or archive, C sources, IR).
 * Thin: cuvil_options_parse() reads the arguments, cuvil_compile_file() compiles. */
#include <cuvil/cuvil.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fputs("usage: cuvil-compile --model M.onnx --output OUT [options]\n"
          "  --output OUT          M.so (default), M.a, a folder for --emit c, a file or - for ir/dot\n"
          "  --emit so|a|c|ir|dot  what to write (default: from OUT's extension, else so)\n"
          "  --target T            generic, x86_64-avx2, x86_64-avx512, aarch64-neon or riscv64-rvv\n"
          "                        (default: this machine's ISA; for another ISA, --emit c and build there)\n"
          "  --opt-level N         0..3 (default 2)\n"
          "  --shape IN=d0,d1,...  the dims of input IN: numbers, ranges LO:HI[:STEP] (symbolic at run\n"
          "                        time) or names; works for dims the model leaves unnamed\n"
          "  --seq IN=N|LO:HI      sequence input IN holds N elements, or LO..HI (its elements' open\n"
          "                        dims: the largest each may be, from --shape IN=d0,d1,...)\n"
          "  --weights-format F    asm (default: weights.bin linked with .incbin) or c (a C array,\n"
          "                        for toolchains without GNU .incbin)\n"
          "  --precision P         fp32 (default), fp16 or bf16: the library stores its float32\n"
          "                        weights in 16 bits (about half the size); MatMul/Gemm weights and\n"
          "                        embedding tables are read so, the others widened when a context\n"
          "                        is created; arithmetic and activations stay float32 (bf16: the\n"
          "                        products on 16-bit weights take bfloat16 operands, float32 sums).\n"
          "                        A float16/bfloat16 model keeps its products' weights in 16 bits\n"
          "                        (exactly) unless fp32 is given\n"
          "  --activations A       fp32 (default), fp16 or bf16: the float32 tensors that go from one\n"
          "                        kernel to others (1,024 elements and more) are stored in 16 bits\n"
          "                        between them, rounded once; each kernel computes in float32\n"
          "  --quantize int8       Cuvil's own quantizer: convolutions (not depthwise), MatMul and Gemm\n"
          "                        with constant weights in int8 (weights symmetric per channel,\n"
          "                        activations uint8), calibrated on --calibrate DIR; prints the\n"
          "                        accuracy cost on the calibration sets against float32\n"
          "  --quantize int4-weights  MatMul and Gemm weights in 4 bits (blocks of 32, asymmetric),\n"
          "                        dequantized inside the product; no calibration\n"
          "  --calibrate DIR       the input sets: a folder per set holding <input>.npy for each input\n"
          "                        ('/' in a name written '_'), or .npy files for a model with one input\n"
          "  --calibration M       minmax (default), percentile (99.999th of |x|) or entropy (KL)\n"
          "  --keep-float NAME|OP  leave a node (by name) or an op (Conv, MatMul, Gemm) in float32;\n"
          "                        repeatable\n"
          "  --dim NAME=N          fix the model's symbolic dim NAME to N (default 1); repeatable\n"
          "  --dim NAME=LO:HI      keep NAME symbolic: the model takes any value in LO..HI at run time\n"
          "                        (at most 3 dims stay symbolic)\n"
          "  --dim NAME=LO:HI:STEP  the multiples of STEP in LO..HI (sizes divided by strides stay\n"
          "                        exact: a CNN's --dim H=32:1024:32)\n"
          "  --name PREFIX         symbol prefix of the model's C API (default: OUT's file name)\n"
          "  --disable-pass NAME   skip an optional pass; repeatable\n"
          "  --dump-ir-after NAME  print the IR after pass NAME (or 'all', 'load') to stderr\n"
          "  --cc CC               C compiler (default: $CC, else the one Cuvil was built with)\n"
          "  --keep-sources        keep the generated C next to the output\n"
          "  --limit NAME=N        raise a bound on untrusted models (docs/SECURITY.md): model_bytes,\n"
          "                        nesting, subgraph_depth, nodes, values, dim, tensor_bytes,\n"
          "                        total_bytes, folded_bytes, fold_ops; N may end in K, M, G or T\n"
          "  -v, --verbose         print compiler commands\n"
          "  --list-ops            print the ONNX ops Cuvil takes (domain, op, first opset, CIR op)\n"
          "  --version, --help\n", f);
}

/* The message quotes names from the model and the arguments: control characters (terminal
 * escapes) are shown as '?', and every line after the first is indented, so that no name can
 * forge a line of its own ("cuvil-compile: ok"). */
static void print_error(const char *msg) {
    fputs("cuvil-compile: ", stderr);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p == '\n') fputs(p[1] ? "\n  " : "", stderr);
        else fputc(*p == '\t' || (*p >= 0x20 && *p != 0x7f) ? *p : '?', stderr);
    }
    fputc('\n', stderr);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("cuvil-compile %s\n", cuvil_version());
            return 0;
        }
        if (!strcmp(argv[i], "--list-ops")) {
            size_t n = cuvil_supported_ops(NULL, 0);
            char *buf = malloc(n + 1);
            if (!buf || !n) {
                fputs("cuvil-compile: out of memory\n", stderr);
                free(buf);
                return 2;
            }
            cuvil_supported_ops(buf, n + 1);
            fputs(buf, stdout);
            free(buf);
            return 0;
        }
    }
    cuvil_ctx *ctx = NULL;
    if (cuvil_ctx_create(&ctx) != CUVIL_OK) {
        fputs("cuvil-compile: out of memory\n", stderr);
        return 2;
    }
    cuvil_options o;
    cuvil_options_init(&o);
    const char *model, *output;
    /* a bad argument exits 2, a model that does not compile 1 */
    cuvil_status s = cuvil_options_parse(ctx, &o, argc - 1, (const char *const *)argv + 1, &model, &output);
    if (s != CUVIL_OK) {
        print_error(cuvil_errmsg(ctx));
        cuvil_ctx_destroy(ctx);
        return 2;
    }
    /* Ctrl-C, a kill or a file-size limit never leaves a build folder or temp file behind */
    cuvil_install_signal_cleanup();
    s = cuvil_compile_file(ctx, model, &o, output);
    if (s != CUVIL_OK) print_error(cuvil_errmsg(ctx));
    cuvil_ctx_destroy(ctx);
    return s == CUVIL_OK ? 0 : 1;
}
