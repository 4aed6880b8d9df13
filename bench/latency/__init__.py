"""What the gateway costs: the same queries direct, through the gateway, and through a peer."""
