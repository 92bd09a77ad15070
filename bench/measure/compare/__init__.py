"""Runs across tags: the result store (:mod:`.store`: ``RESULTS_DIR/<tag>/*.json``, tags and the
configuration that differs between them), the statistics (:mod:`.stats`, with the Mann-Whitney U
of :mod:`.ranks`), ``bench compare`` (:mod:`.comparison`), ``bench history`` (:mod:`.history`),
and the probe gate that keeps a tag whose probe failed out of a ranking (:mod:`.gates`).
"""
