"""Security of the broker's connections: TLS, SASL, principals, authorization."""
