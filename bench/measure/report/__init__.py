"""``bench report``: what is drawn and printed, gathered from the store (:mod:`.data`), the
matplotlib plots (:mod:`.plots`), and the self-contained HTML page with its PNGs and the
capability cards (:mod:`.page`, template in ``templates/``).
"""
