"""The one-byte code's cost to federated FZOO (bench/fed_fzoo_code.sh; docs/FEDERATED.md "FZOO").

usage: fed_fzoo_code.py RUN_F32 RUN_BYTE N CLIP [WINDOW]

1. The code applied to the f32 run's logged coefficients (src/federated/byte_code.c's
   formula): each coefficient's relative error, and per round the update's relative error
   sqrt(sum_j (g_j - code(g_j))^2 / sum_j g_j^2) (the directions are independent Rademacher
   vectors, so that is the norm of the update's error over the update's).
2. The two runs side by side: the workers' training loss (l0) by windows of rounds, the
   largest difference in one round, and the coordinator's test accuracy rows.
"""
import json
import math
import struct
import sys


def code(g, clip):
    if g == 0:
        return 0.0
    k = min(127, 127 + round(16 * math.log(abs(g) / clip)))  # round(): ties to even, as nearbyint
    if k < 1:
        return 0.0
    m = clip * math.exp((k - 127) / 16)
    return -m if g < 0 else m


def records(path, q):
    data, rec = open(path, 'rb').read(), 12 + 4 * q
    return [struct.unpack_from('<%df' % q, data, off + 8) for off in range(104, len(data) - rec + 1, rec)]


def code_error(run, q, clip):
    rel, upd, mags = [], [], []
    for g in records(run + '/seeds.log', q):
        gq = [code(x, clip) for x in g]
        rel += [abs(y - x) / abs(x) for x, y in zip(g, gq) if x]
        mags += [abs(x) for x in g if x]
        den = sum(x * x for x in g)
        if den:
            upd.append(math.sqrt(sum((x - y) ** 2 for x, y in zip(g, gq)) / den))
    print('%d coefficients, |g| %.3g..%.3g (median %.3g), %d above the clip, %d below the smallest code (sent as 0)'
          % (len(mags), min(mags), max(mags), sorted(mags)[len(mags) // 2], sum(m > clip for m in mags),
             sum(code(m, clip) == 0 for m in mags)))
    print('coefficient relative error: mean %.4f, median %.4f; update relative error: mean %.4f, max %.4f'
          % (sum(rel) / len(rel), sorted(rel)[len(rel) // 2], sum(upd) / len(upd), max(upd)))


def side_by_side(a_run, b_run, window):
    a = [json.loads(line) for line in open(a_run + '/metrics.jsonl')]
    b = [json.loads(line) for line in open(b_run + '/metrics.jsonl')]
    la = [r['loss'] for r in a if r.get('loss') is not None]
    lb = [r['loss'] for r in b if r.get('loss') is not None]
    n = min(len(la), len(lb))
    for i in range(0, n, window):
        x, y = la[i:i + window], lb[i:i + window]
        print('rounds %d-%d: training loss f32 %.4f, byte %.4f' % (i + 1, i + len(x), sum(x) / len(x), sum(y) / len(y)))
    print('largest |loss f32 - loss byte| of one round: %.4f (%d rounds)' % (max(abs(x - y) for x, y in zip(la, lb)), n))
    for r, s in zip(a, b):
        if 'test_accuracy' in r or 'test_accuracy' in s:
            print('round %d: test accuracy f32 %s, byte %s' % (r['step'], r.get('test_accuracy'), s.get('test_accuracy')))


if __name__ == '__main__':
    f32, byte, q, clip = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    code_error(f32, q, clip)
    side_by_side(f32, byte, int(sys.argv[5]) if len(sys.argv) > 5 else 10)
