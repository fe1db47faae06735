"""Benchmarks (`invoke bench`): fleet against the hand-made loop and ansible-core, side by side.

Every benchmark runs its contenders in the same run, alternating, for several repetitions, and
reports median and min-max per contender plus the ratios (lab.bench.stats, lab.bench.report).
Docker benchmarks share one harness (lab.bench.fixture); the others run on this machine.
"""
