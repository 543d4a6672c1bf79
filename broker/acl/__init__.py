"""Plain ACL (RocketMQ 4.9's ACL 1.0) for the broker and the name server.

- :mod:`~rocklet.broker.acl.addresses`: white-list address patterns;
- :mod:`~rocklet.broker.acl.accounts`: permissions, accounts and the table parsed from
  ``plain_acl.yml`` documents;
- :mod:`~rocklet.broker.acl.files`: finding, loading, watching and editing the files;
- :mod:`~rocklet.broker.acl.validator`: which permission a request needs, and the
  check run before every request;
- :mod:`~rocklet.broker.acl.admin`: the ACL admin requests (codes 50-54).

Signing itself is sans-IO and shared with the SDK: :mod:`rocklet.protocol.acl`.
"""
