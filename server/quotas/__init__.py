"""Client quotas and replication quotas, as Kafka's quota managers keep them.

`rate` is Kafka's sampled rate and the throttle time it implies; `entities` resolves
which quota entity governs a (user, client id) with Kafka's precedence; `manager` is
one quota type's sensors (produce bytes, fetch bytes, request time); `service` feeds
them from the entity config store and answers the request path; `replication` is the
leader's and follower's replication throttle. Plain synchronous code: the connection
does the muting.
"""
