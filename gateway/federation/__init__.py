"""A source that fans a read out to several stores and fuses their answers."""
