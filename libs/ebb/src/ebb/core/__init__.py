"""The pure core: cluster model, scheduling simulator and decision engine.

Nothing here performs I/O, reads the clock or logs; an import-linter contract keeps I/O libraries out.
"""
