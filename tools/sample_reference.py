"""Reference for dz_dataset_sample (src/data/sample.c), written independently in Python.

Run:  /work/venv/bin/python tools/sample_reference.py
Prints the indices drawn for the cases pinned in tests/test_data.c (sample_known_answer);
paste them there if the sampling algorithm is ever changed on purpose.

Algorithm: splitmix64 seeded with `seed`; uniform integer below `bound` by rejecting
draws under (2**64 - bound) % bound, then r % bound; partial Fisher-Yates: for i in
0..n-1 swap order[i] with order[i + uniform(count - i)]; the sample is order[:n].
"""

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def uniform_below(rng, bound):
    threshold = (1 << 64) % bound  # == (2**64 - bound) % bound
    while True:
        r = rng.next()
        if r >= threshold:
            return r % bound


def sample(count, n, seed):
    rng = SplitMix64(seed)
    order = list(range(count))
    n = min(n, count)
    for i in range(n):
        j = i + uniform_below(rng, count - i)
        order[i], order[j] = order[j], order[i]
    return order[:n]


def main():
    # Published splitmix64 outputs for seed 1234567 (Vigna's reference C code).
    rng = SplitMix64(1234567)
    assert [rng.next() for _ in range(3)] == [
        6457827717110365317, 3203168211198807973, 9817491932198370423]
    for count, n, seed in [(100, 10, 42), (100, 10, 0), (67349, 5, 1)]:
        print(f"count={count} n={n} seed={seed}: {{{', '.join(map(str, sample(count, n, seed)))}}}")


if __name__ == "__main__":
    main()
