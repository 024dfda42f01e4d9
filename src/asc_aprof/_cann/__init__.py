"""CANN access: toolkit discovery, the ctypes binding, the collector thread, the export runner, and
the disk CANN writes (layout, the file-opening rule).
"""
