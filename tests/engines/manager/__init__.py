"""The engine manager behind tests/engines/engines.py, one concern per module."""
