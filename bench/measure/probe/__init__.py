"""``bench probe``: what the deployment expects (:mod:`.expect`), the one request a check makes
(:mod:`.http`), the tool-call checks (:mod:`.tools`), every check and the probe that runs them
(:mod:`.checks`), and the probe's result types and file (:mod:`.result`, schema
``probe.schema.json``).
"""
