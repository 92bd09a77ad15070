"""``bench capacity``: the search over one axis (:mod:`.search`, pure), the attainment of a level
and its Wilson interval (:mod:`.attainment`, pure), the verdict of a level over its batches
(:mod:`.judge`), the result types and file (:mod:`.result`, schema ``capacity.schema.json``), the
answers in words (:mod:`.words`), and the measurement that runs both searches against the
endpoint (:mod:`.measure`).
"""
