/*
 * nms.c -- NonMaxSuppression as ONNX Runtime computes it: per batch and class, the boxes whose
 * score passes the threshold (score > threshold, every box without one), taken by score from
 * the highest (ties: the lower index first; NaN last), each kept unless its IoU with a box
 * already kept for the class is over iou_threshold, at most max_per_class of them.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../rt_int.h"

typedef struct nms_cand {
    float score;
    int64_t index;
} nms_cand;

static int cand_cmp(const void *pa, const void *pb) {
    const nms_cand *a = pa, *b = pb;
    bool na = a->score != a->score, nb = b->score != b->score;
    if (na != nb) return na ? 1 : -1;   /* NaN after every number */
    if (!na && a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* the candidates, the kept indices and each box's extents and area (nms_box) */
typedef struct nms_box {
    float x0, y0, x1, y1, area;
} nms_box;

/* A candidate as one key, larger = taken first (cand_cmp's order): the score's bits made
 * monotonic (-0 as +0, NaN below every number) above the index complemented (ties: the lower
 * index first). Taken from a heap as needed, not all sorted: a class stops at max_per_class
 * boxes (sorting every class's candidates took 86% of 80 classes of 2000 boxes, 3.9x ONNX
 * Runtime's time). */
static inline uint64_t cand_key(float v, int64_t i) {
    const uint32_t hi = v != v ? 0u : cuvil_f32_order_bits(v);
    return ((uint64_t)hi << 32) | (uint64_t)(0xffffffffu - (uint32_t)i);
}

size_t cuvil_nms_scratch_size(int64_t n) {
    return (size_t)(n > 0 ? n : 1) * (sizeof(nms_cand) + sizeof(int64_t) + sizeof(nms_box));
}

/* The extent [lo, hi] of a box along one axis from two corner coordinates (any order). */
static void extent(float a, float b, float *lo, float *hi) {
    *lo = a <= b ? a : b;
    *hi = a <= b ? b : a;
}

/* Box b's extents and area, computed once a batch: [x_center, y_center, width, height] with
 * center, else [y1, x1, y2, x2] with any diagonal pair of corners (the same operations the
 * test below made for each pair: 80 classes of 2000 boxes took 3.9x ONNX Runtime's time). */
static nms_box box_of(const float *b, int center) {
    nms_box r;
    if (center) {
        r.x0 = b[0] - b[2] / 2, r.x1 = b[0] + b[2] / 2, r.y0 = b[1] - b[3] / 2, r.y1 = b[1] + b[3] / 2;
    } else {
        extent(b[1], b[3], &r.x0, &r.x1);
        extent(b[0], b[2], &r.y0, &r.y1);
    }
    r.area = (r.x1 - r.x0) * (r.y1 - r.y0);
    return r;
}

/* Whether box q is suppressed by kept box k: their IoU over thr (boxes of no area never are). */
static bool suppressed(const nms_box *k, const nms_box *q, float thr) {
    float ix0 = k->x0 > q->x0 ? k->x0 : q->x0, ix1 = k->x1 < q->x1 ? k->x1 : q->x1;
    float iy0 = k->y0 > q->y0 ? k->y0 : q->y0, iy1 = k->y1 < q->y1 ? k->y1 : q->y1;
    if (!(ix1 > ix0) || !(iy1 > iy0)) return false;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    float ka = k->area, qa = q->area, uni = ka + qa - inter;
    if (!(inter > 0) || !(ka > 0) || !(qa > 0) || !(uni > 0)) return false;
    return inter / uni > thr;
}

int64_t cuvil_nms(const float *boxes, const float *scores, int64_t nb, int64_t nc, int64_t n, const int64_t *max_per_class,
                  const float *iou_threshold, const float *score_threshold, int center, int64_t *y, int64_t cap,
                  void *scratch) {
    int64_t most = max_per_class ? *max_per_class : 0, count = 0;
    float thr = iou_threshold ? *iou_threshold : 0.0f;
    if (!(thr >= 0.0f && thr <= 1.0f)) return -1;
    if (most <= 0) return 0;
    nms_cand *cand = scratch;
    int64_t *kept = (int64_t *)(void *)(cand + (n > 0 ? n : 1));
    nms_box *bxs = (nms_box *)(void *)(kept + (n > 0 ? n : 1));
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t i = 0; i < n; i++) bxs[i] = box_of(boxes + (b * n + i) * 4, center);
        for (int64_t c = 0; c < nc; c++) {
            const float *sc = scores + (b * nc + c) * n;
            int64_t m = 0, nk = 0;
            uint64_t *key = (uint64_t *)(void *)cand;   /* (8 of nms_cand's 16 bytes a candidate) */
            const int keyed = n < 0xffffffffLL;
            for (int64_t i = 0; i < n; i++)
                if (!score_threshold || sc[i] > *score_threshold) {
                    if (keyed) key[m++] = cand_key(sc[i], i);
                    else cand[m++] = (nms_cand){sc[i], i};
                }
            if (keyed)   /* a max-heap of the keys, popped in order until the class has its boxes */
                for (int64_t i = m / 2 - 1; i >= 0; i--) cuvil_u64_heap_down(key, m, i, 1);
            else
                qsort(cand, (size_t)m, sizeof *cand, cand_cmp);
            for (int64_t j = 0, left = m; j < m && nk < most; j++) {
                int64_t idx;
                if (keyed) {
                    idx = (int64_t)(0xffffffffu - (uint32_t)key[0]);
                    key[0] = key[--left];
                    cuvil_u64_heap_down(key, left, 0, 1);
                } else {
                    idx = cand[j].index;
                }
                bool keep = true;
                for (int64_t t = 0; t < nk && keep; t++) keep = !suppressed(&bxs[kept[t]], &bxs[idx], thr);
                if (!keep) continue;
                if (count == cap) return -1;
                kept[nk++] = idx;
                y[count * 3] = b;
                y[count * 3 + 1] = c;
                y[count * 3 + 2] = idx;
                count++;
            }
        }
    }
    return count;
}
