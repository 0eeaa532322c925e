"""Who is asking and what they may read: credentials and identities, authentication (``TokenReview``), authorization (the resource policy, then the caller's rights by ``SubjectAccessReview``), and the decision caches in front of both."""

__all__: list[str] = []
