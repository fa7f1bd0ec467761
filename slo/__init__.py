"""Pure-Python core of the TTFT SLO suite: scenario files, samples, statistics, verdicts.

Nothing in this package imports pytest, so it can be tested and reused on its own.
"""
