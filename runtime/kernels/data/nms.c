/*
 * nms.c -- NonMaxSuppression as ONNX Runtime computes it: per batch and class, the boxes whose
 * score passes the threshold (score > threshold, every box without one), taken by score from
 * the highest (ties: the lower index first; NaN last), each kept unless its IoU with a box
 * already kept for the class is over iou_threshold, at most max_per_class of them.
 */
#include <stdbool.h>
#include <stdlib.h>

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

size_t cuvil_nms_scratch_size(int64_t n) { return (size_t)(n > 0 ? n : 1) * (sizeof(nms_cand) + sizeof(int64_t)); }

/* The extent [lo, hi] of a box along one axis from two corner coordinates (any order). */
static void extent(float a, float b, float *lo, float *hi) {
    *lo = a <= b ? a : b;
    *hi = a <= b ? b : a;
}

/* Whether box q is suppressed by kept box k: their IoU over thr (boxes of no area never are). */
static bool suppressed(const float *k, const float *q, int center, float thr) {
    float kx0, kx1, ky0, ky1, qx0, qx1, qy0, qy1;
    if (center) {   /* [x_center, y_center, width, height] */
        kx0 = k[0] - k[2] / 2, kx1 = k[0] + k[2] / 2, ky0 = k[1] - k[3] / 2, ky1 = k[1] + k[3] / 2;
        qx0 = q[0] - q[2] / 2, qx1 = q[0] + q[2] / 2, qy0 = q[1] - q[3] / 2, qy1 = q[1] + q[3] / 2;
    } else {   /* [y1, x1, y2, x2]: any diagonal pair of corners */
        extent(k[1], k[3], &kx0, &kx1);
        extent(k[0], k[2], &ky0, &ky1);
        extent(q[1], q[3], &qx0, &qx1);
        extent(q[0], q[2], &qy0, &qy1);
    }
    float ix0 = kx0 > qx0 ? kx0 : qx0, ix1 = kx1 < qx1 ? kx1 : qx1;
    float iy0 = ky0 > qy0 ? ky0 : qy0, iy1 = ky1 < qy1 ? ky1 : qy1;
    if (!(ix1 > ix0) || !(iy1 > iy0)) return false;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    float ka = (kx1 - kx0) * (ky1 - ky0), qa = (qx1 - qx0) * (qy1 - qy0), uni = ka + qa - inter;
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
    for (int64_t b = 0; b < nb; b++) {
        const float *bx = boxes + b * n * 4;
        for (int64_t c = 0; c < nc; c++) {
            const float *sc = scores + (b * nc + c) * n;
            int64_t m = 0, nk = 0;
            for (int64_t i = 0; i < n; i++)
                if (!score_threshold || sc[i] > *score_threshold) cand[m++] = (nms_cand){sc[i], i};
            qsort(cand, (size_t)m, sizeof *cand, cand_cmp);
            for (int64_t j = 0; j < m && nk < most; j++) {
                bool keep = true;
                for (int64_t t = 0; t < nk && keep; t++) keep = !suppressed(bx + kept[t] * 4, bx + cand[j].index * 4, center, thr);
                if (!keep) continue;
                if (count == cap) return -1;
                kept[nk++] = cand[j].index;
                y[count * 3] = b;
                y[count * 3 + 1] = c;
                y[count * 3 + 2] = cand[j].index;
                count++;
            }
        }
    }
    return count;
}
