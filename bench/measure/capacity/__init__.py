"""``bench capacity``: the search over one axis (:mod:`.search`, pure), the result types and
file (:mod:`.result`, schema ``capacity.schema.json``), and the measurement that runs both
searches against the endpoint (:mod:`.measure`).
"""
