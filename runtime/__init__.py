"""PJRT runtime: devices, compilation (cached), argument transfer and execution."""
