"""One configured index as an A2M source: plan, page, shape, profile and the connector spec."""
