"""HTTP layer: the filter chain, routing, Status errors and content negotiation."""
