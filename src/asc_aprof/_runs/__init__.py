"""Run reading: the front door (open_run), the CSV and raw readers, timelines, the plan steps and
the two drivers.
"""
