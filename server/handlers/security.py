"""Security APIs served as requests: ACLs (CreateAcls, DescribeAcls, DeleteAcls, as Kafka's
AclApis), SCRAM credentials (DescribeUserScramCredentials, AlterUserScramCredentials, what
``kafka-configs.sh --entity-type users`` sends), and the SASL requests where no exchange
is going on (a listener without SASL, or after authentication without re-authentication):
ILLEGAL_SASL_STATE, as Kafka's KafkaApis."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.acl import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.api_key import ApiKey

from josefk.cluster.security.acls import (
    NO_AUTHORIZER_DESCRIBE_MESSAGE,
    NO_AUTHORIZER_MESSAGE,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    MalformedAclRequest,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    check_acl_filter,
    check_create_acls_request,
    create_acls_errors,
)
from josefk.cluster.security.credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
)
from josefk.protocol.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    DUPLICATE_RESOURCE,
    ILLEGAL_SASL_STATE,
    NONE,
    RESOURCE_NOT_FOUND,
    SECURITY_DISABLED,
    UNACCEPTABLE_CREDENTIAL,
    UNSUPPORTED_SASL_MECHANISM,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.network.connection import CloseConnection
from josefk.server.security.checks import ERROR_MESSAGES
from josefk.server.security.scram import credential_from_salted_password

if TYPE_CHECKING:
    from josefk.server.broker import Broker

DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = DescribeResult.CredentialInfo
AlterResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
AclCreationResult = CreateAclsResponse.AclCreationResult
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
MatchingAcl = FilterResult.DeleteAclsMatchingAcl
DescribedResource = DescribeAclsResponse.DescribeAclsResource
AclDescription = DescribedResource.AclDescription
# ScramMechanism's wire codes: 0 is UNKNOWN.
MECHANISM_CODES = {code: name for code, name in enumerate(SCRAM_MECHANISMS, start=1)}
_CODE_OF = {name: code for code, name in MECHANISM_CODES.items()}


async def handle_sasl_handshake(broker: Broker, request: Request) -> Response:
    return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}


async def handle_sasl_authenticate(broker: Broker, request: Request) -> Response:
    return {"error_code": ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime_ms": 0,
            "error_message": "SaslAuthenticate request received after successful "
                             "authentication"}


# --- ACLs ------------------------------------------------------------------------------------


async def handle_create_acls(broker: Broker, request: Request) -> Response:
    bindings = [acl_binding(c) for c in request.body.creations]
    errors = _acl_errors(broker, request, NO_AUTHORIZER_MESSAGE,
                         lambda: check_create_acls_request(bindings, request.api_version))
    if errors is not None:
        results = [errors] * len(bindings)
    else:
        results = create_acls_errors(bindings)
        valid = [b for b, error in zip(bindings, results, strict=True) if error is None]
        if valid:
            await broker.security_store.create_acls(valid)
    return {"throttle_time_ms": 0, "results": [
        AclCreationResult(error_code=e.code if e else NONE, error_message=e.message if e else None)
        for e in results]}


async def handle_describe_acls(broker: Broker, request: Request) -> Response:
    acl_filter = binding_filter(request.body)
    checked: list[AclBindingFilter] = []
    error = _acl_errors(broker, request, NO_AUTHORIZER_DESCRIBE_MESSAGE,
                        lambda: checked.append(check_acl_filter(acl_filter, request.api_version)),
                        AclOperation.DESCRIBE)
    if error is not None:
        return {"throttle_time_ms": 0, "error_code": error.code,
                "error_message": error.message, "resources": []}
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
            "resources": described_resources(broker.security_store.acls.matching(checked[0]))}


async def handle_delete_acls(broker: Broker, request: Request) -> Response:
    filters = [binding_filter(f) for f in request.body.filters]
    checked: list[AclBindingFilter] = []
    error = _acl_errors(broker, request, NO_AUTHORIZER_MESSAGE, lambda: checked.extend(
        check_acl_filter(f, request.api_version) for f in filters))
    if error is not None:
        return {"throttle_time_ms": 0, "filter_results": [
            FilterResult(error_code=error.code, error_message=error.message, matching_acls=[])
            for _ in filters]}
    removed = await broker.security_store.delete_acls(checked) if checked else []
    return {"throttle_time_ms": 0, "filter_results": [
        FilterResult(error_code=NONE, error_message=None,
                     matching_acls=[matching_acl(b) for b in bindings]) for bindings in removed]}


def acl_binding(creation: Any) -> AclBinding:
    """A CreateAcls creation; codes Kafka does not know read as UNKNOWN."""
    return AclBinding(
        ResourcePattern(ResourceType.from_code(creation.resource_type), creation.resource_name,
                        PatternType.from_code(creation.resource_pattern_type)),
        AccessControlEntry(creation.principal, creation.host,
                           AclOperation.from_code(creation.operation),
                           AclPermissionType.from_code(creation.permission_type)))


def binding_filter(wire: Any) -> AclBindingFilter:
    """A DescribeAcls request's filter, or one of DeleteAcls'."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(wire.resource_type_filter),
                              wire.resource_name_filter,
                              PatternType.from_code(wire.pattern_type_filter)),
        AccessControlEntryFilter(wire.principal_filter, wire.host_filter,
                                 AclOperation.from_code(wire.operation),
                                 AclPermissionType.from_code(wire.permission_type)))


def described_resources(bindings: Iterable[AclBinding]) -> list[Any]:
    """``DescribeAclsResponse.aclsResources``: the bindings grouped by resource pattern."""
    by_pattern: dict[ResourcePattern, list[Any]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append(AclDescription(
            principal=b.entry.principal, host=b.entry.host, operation=b.entry.operation,
            permission_type=b.entry.permission))
    return [DescribedResource(resource_type=p.resource_type, resource_name=p.name,
                              pattern_type=p.pattern_type, acls=acls)
            for p, acls in by_pattern.items()]


def matching_acl(b: AclBinding) -> Any:
    return MatchingAcl(error_code=NONE, error_message=None,
                       resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                       pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
                       host=b.entry.host, operation=b.entry.operation,
                       permission_type=b.entry.permission)


def _acl_errors(broker: Broker, request: Request, no_authorizer: str,
                validate: Callable[[], object],
                operation: AclOperation = AclOperation.ALTER) -> AclError | None:
    """The checks of an ACL request, in Kafka's order: the request must parse (a malformed
    one closes the connection), the client needs ``operation`` on the cluster, and there
    must be an authorizer; the error every answer of the request gets, or None."""
    try:
        validate()
    except MalformedAclRequest as e:
        raise CloseConnection(f"malformed {ApiKey(request.api_key).name}: {e}") from e
    if not broker.authorizer.enabled:
        return AclError(SECURITY_DISABLED, no_authorizer)
    if not broker.authorizer.cluster_allowed(operation):
        return AclError(CLUSTER_AUTHORIZATION_FAILED,
                        f"Request {ApiKey(request.api_key).name} is not authorized.")
    return None


# --- SCRAM credentials --------------------------------------------------------------------------


async def handle_describe_scram(broker: Broker, request: Request) -> Response:
    if not broker.authorizer.cluster_allowed(AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED,
                "error_message": ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED], "results": []}
    users = broker.security_store.users
    asked = [u.name for u in request.body.users or []]
    counts = Counter(asked)
    results = []
    for name in (dict.fromkeys(asked) if asked else sorted(users)):
        if counts[name] > 1:
            results.append(DescribeResult(
                user=name, error_code=DUPLICATE_RESOURCE, credential_infos=[],
                error_message="Cannot describe SCRAM credentials for the same user twice in "
                              "a single request"))
        elif name not in users:
            results.append(DescribeResult(
                user=name, error_code=RESOURCE_NOT_FOUND, credential_infos=[],
                error_message="Attempt to describe a user credential that does not exist"))
        else:
            results.append(DescribeResult(user=name, error_code=NONE, error_message=None,
                                          credential_infos=[
                CredentialInfo(mechanism=_CODE_OF[m], iterations=c.iterations)
                for m, c in sorted(users[name].items(), key=lambda mc: _CODE_OF[mc[0]])]))
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
            "results": results}


async def handle_alter_scram(broker: Broker, request: Request) -> Response:
    """Every change of a user is checked first; a user with any bad change has none
    applied. A user changed twice in one request is DUPLICATE_RESOURCE: twice at all on a
    single broker (Kafka 4's ScramControlManager), twice for one mechanism in a cluster
    (Kafka 3.9's ZkAdminManager)."""
    body, store = request.body, broker.security_store
    if not broker.authorizer.cluster_allowed(AclOperation.ALTER):
        # AlterUserScramCredentialsRequest.getErrorResponse: each user once, sorted.
        named = {d.name for d in body.deletions} | {u.name for u in body.upsertions}
        return {"throttle_time_ms": 0, "results": [
            AlterResult(user=user, error_code=CLUSTER_AUTHORIZATION_FAILED,
                        error_message=ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED])
            for user in sorted(named)]}
    by_user = broker.cluster is None
    pairs = Counter((d.name, None if by_user else d.mechanism) for d in body.deletions)
    pairs.update((u.name, None if by_user else u.mechanism) for u in body.upsertions)
    errors: dict[str, tuple[int, str]] = {}
    for (user, _), count in pairs.items():
        if count > 1:
            errors.setdefault(user, (DUPLICATE_RESOURCE, "A user credential cannot be "
                                     "altered twice in the same request"))
    for d in body.deletions:
        error = _mechanism_error(d.mechanism) or _name_error(d.name)
        if error is None and store.scram_credential(MECHANISM_CODES[d.mechanism],
                                                    d.name) is None:
            error = (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not "
                                         "exist")
        if error is not None:
            errors.setdefault(d.name, error)
    for u in body.upsertions:
        error = _mechanism_error(u.mechanism) or _name_error(u.name) or _iterations_error(
            u.iterations)
        if error is not None:
            errors.setdefault(u.name, error)
    deletions = [(d.name, MECHANISM_CODES[d.mechanism]) for d in body.deletions
                 if d.name not in errors]
    upsertions = [(u.name, MECHANISM_CODES[u.mechanism], _credential(u)) for u in body.upsertions
                  if u.name not in errors]
    if deletions or upsertions:
        await store.alter_scram(upsertions, deletions)
    users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    return {"throttle_time_ms": 0, "results": [
        AlterResult(user=user, error_code=errors.get(user, (NONE, None))[0],
                    error_message=errors.get(user, (NONE, None))[1]) for user in users]}


def _mechanism_error(code: int) -> tuple[int, str] | None:
    if code not in MECHANISM_CODES:
        return UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _name_error(name: str) -> tuple[int, str] | None:
    return (UNACCEPTABLE_CREDENTIAL, "Username must not be empty") if not name else None


def _iterations_error(iterations: int) -> tuple[int, str] | None:
    if iterations < MIN_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations > MAX_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def _credential(upsertion: Any) -> ScramCredential:
    return credential_from_salted_password(
        MECHANISM_CODES[upsertion.mechanism], bytes(upsertion.salted_password),
        bytes(upsertion.salt), upsertion.iterations)


HANDLERS = {
    ApiKey.CreateAcls: handle_create_acls,
    ApiKey.DescribeAcls: handle_describe_acls,
    ApiKey.DeleteAcls: handle_delete_acls,
    ApiKey.SaslHandshake: handle_sasl_handshake,
    ApiKey.SaslAuthenticate: handle_sasl_authenticate,
    ApiKey.DescribeUserScramCredentials: handle_describe_scram,
    ApiKey.AlterUserScramCredentials: handle_alter_scram,
}
