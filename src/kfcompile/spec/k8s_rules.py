"""Kubernetes' own validation grammar, reimplemented without dependencies.

Mirrors ``k8s.io/apimachinery/pkg/util/validation`` (names, labels, env vars),
``k8s.io/apimachinery/pkg/api/resource`` (quantities, in ``k8s_quantity``, re-exported here) and
the resource-name helpers of
``k8s.io/kubernetes/pkg/apis/core/helper``. Every validator returns a list of problems (empty
list = valid) and never raises, whatever it is given. Name and label problems use Kubernetes'
wording verbatim; quantity problems say more precisely what is wrong than Kubernetes' generic
"quantities must match the regular expression ...". Lengths are counted in UTF-8 bytes, as
Go's ``len`` does; any non-ASCII input is rejected by the patterns anyway.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

from kfcompile.spec.k8s_quantity import (
    compare_quantities,
    parse_quantity,
    quantity,
    resource_quantity,
)

__all__ = [
    "compare_quantities",
    "configmap_key",
    "dns1035_label",
    "dns1123_label",
    "dns1123_subdomain",
    "env_var_name",
    "id_number",
    "ip_address",
    "is_extended_resource",
    "is_hugepages_resource",
    "is_overcommit_allowed",
    "label_value",
    "parse_quantity",
    "port_name",
    "port_number",
    "qualified_name",
    "quantity",
    "resource_name",
    "resource_quantity",
]

DNS1123_LABEL_MAX_LENGTH: Final = 63
DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
DNS1035_LABEL_MAX_LENGTH: Final = 63
QUALIFIED_NAME_MAX_LENGTH: Final = 63
LABEL_VALUE_MAX_LENGTH: Final = 63

_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_ERR: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT: Final = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_FMT: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_ERR: Final = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_ERR: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_FMT: Final = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_ERR: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character"
)
_ENV_VAR_NAME_FMT: Final = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_ENV_VAR_NAME_ERR: Final = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', "
    "'-', or '.', and must not start with a digit"
)

_CONFIGMAP_KEY_FMT: Final = "[-._a-zA-Z0-9]+"
_CONFIGMAP_KEY_ERR: Final = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
)
PORT_NAME_MAX_LENGTH: Final = 15
# Named ports are rare: these two stay text, compiled (and cached) by re when used.
_PORT_NAME_CHARSET_RE: Final = "[-a-z0-9]+"
_PORT_NAME_ONE_LETTER_RE: Final = "[a-z]"
ID_MAX: Final = 2**31 - 1  # minUserID/maxUserID, minGroupID/maxGroupID

# Patterns are used with fullmatch(): Go anchors them with ^...$, and Python's $ would also
# accept a trailing newline.
_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL_FMT)
_DNS1035_LABEL_RE: Final = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE: Final = re.compile(_QUALIFIED_NAME_FMT)
_ENV_VAR_NAME_RE: Final = re.compile(_ENV_VAR_NAME_FMT)
_CONFIGMAP_KEY_RE: Final = re.compile(_CONFIGMAP_KEY_FMT)

_EMPTY_ERR: Final = "must be non-empty"


# The subdomain and label-value patterns are made of the label and qualified-name ones, and are
# matched through them: their own compiled patterns cost a render 1.7 M instructions.
def _is_dns1123_subdomain(value: str) -> bool:
    return all(_DNS1123_LABEL_RE.fullmatch(label) for label in value.split("."))


def _is_label_value(value: str) -> bool:
    return not value or _QUALIFIED_NAME_RE.fullmatch(value) is not None


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Kubernetes' ``RegexError``, byte for byte (including its doubled space before "or")."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _byte_len(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _not_a_string(value: object) -> list[str]:
    return [f"must be a string, not {type(value).__name__}"]


def dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label: at most 63 characters of ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``."""
    if not _is_str(value):
        return _not_a_string(value)
    errs: list[str] = []
    if _byte_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(_max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _is_dns1123_subdomain(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_DNS1123_LABEL_ERR, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain: at most 253 characters of dot-separated DNS-1123 labels."""
    if not _is_str(value):
        return _not_a_string(value)
    errs: list[str] = []
    if _byte_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(_max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _is_dns1123_subdomain(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label: at most 63 characters of ``[a-z]([-a-z0-9]*[a-z0-9])?``."""
    if not _is_str(value):
        return _not_a_string(value)
    errs: list[str] = []
    if _byte_len(value) > DNS1035_LABEL_MAX_LENGTH:
        errs.append(_max_len_error(DNS1035_LABEL_MAX_LENGTH))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1035_LABEL_ERR, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def qualified_name(value: str) -> list[str]:
    """IsQualifiedName (label and annotation keys): ``[prefix/]name``.

    The optional prefix is a DNS-1123 subdomain; the name is at most 63 characters matching
    ``([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]``.
    """
    if not _is_str(value):
        return _not_a_string(value)
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + _EMPTY_ERR)
        else:
            errs.extend("prefix part " + msg for msg in dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_NAME_ERR, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + _EMPTY_ERR)
    elif _byte_len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append("name part " + _max_len_error(QUALIFIED_NAME_MAX_LENGTH))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append(
            "name part "
            + _regex_error(_QUALIFIED_NAME_ERR, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def label_value(value: str) -> list[str]:
    """IsValidLabelValue: empty, or at most 63 characters of the qualified-name alphabet."""
    if not _is_str(value):
        return _not_a_string(value)
    errs: list[str] = []
    if _byte_len(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(_max_len_error(LABEL_VALUE_MAX_LENGTH))
    if not _is_label_value(value):
        errs.append(
            _regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errs


def env_var_name(value: str) -> list[str]:
    """IsEnvVarName: ``[-._a-zA-Z][-._a-zA-Z0-9]*``, not ``.``, not ``..``, no ``..`` prefix.

    This is the strict rule; clusters with ``RelaxedEnvironmentVariableValidation`` accept more.
    """
    if not _is_str(value):
        return _not_a_string(value)
    errs: list[str] = []
    if not _ENV_VAR_NAME_RE.fullmatch(value):
        errs.append(
            _regex_error(
                _ENV_VAR_NAME_ERR, _ENV_VAR_NAME_FMT, "my.env-name", "MY_ENV.NAME", "MyEnvName1"
            )
        )
    return errs + _chdir_prefix(value)


def _chdir_prefix(value: str) -> list[str]:
    """hasChDirPrefix."""
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


def configmap_key(value: str) -> list[str]:
    """IsConfigMapKey (keys of ConfigMaps and Secrets): at most 253 characters of
    ``[-._a-zA-Z0-9]+``, not ``.`` or ``..``, no ``..`` prefix."""
    if not _is_str(value):
        return _not_a_string(value)
    errs: list[str] = []
    if _byte_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(_max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _CONFIGMAP_KEY_RE.fullmatch(value):
        errs.append(
            _regex_error(_CONFIGMAP_KEY_ERR, _CONFIGMAP_KEY_FMT, "key.name", "KEY_NAME", "key-name")
        )
    return errs + _chdir_prefix(value)


def port_name(value: str) -> list[str]:
    """IsValidPortName (an IANA_SVC_NAME): at most 15 characters of ``[-a-z0-9]``, at least
    one letter, no ``--``, no hyphen at either end."""
    if not _is_str(value):
        return _not_a_string(value)
    errs: list[str] = []
    if _byte_len(value) > PORT_NAME_MAX_LENGTH:
        errs.append(_max_len_error(PORT_NAME_MAX_LENGTH))
    if not re.fullmatch(_PORT_NAME_CHARSET_RE, value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    elif not re.search(_PORT_NAME_ONE_LETTER_RE, value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def port_number(value: int) -> list[str]:
    """IsValidPortNum: 1 to 65535."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return ["must be between 1 and 65535, inclusive"]
    return []


def id_number(value: int) -> list[str]:
    """IsValidUserID / IsValidGroupID: 0 to 2147483647."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= ID_MAX:
        return [f"must be between 0 and {ID_MAX}, inclusive"]
    return []


def ip_address(value: str) -> list[str]:
    """IsValidIP: an IPv4 or IPv6 address. Go's parser takes no IPv6 zone (``fe80::1%eth0``),
    which Python's does; it takes IPv4 with leading zeros, which Python's does not (and which
    Kubernetes warns will be refused)."""
    try:
        ipaddress.ip_address(value)
        valid = "%" not in value
    except ValueError:
        valid = False
    return [] if valid else ["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]


def resource_name(value: str) -> list[str]:
    """A resource name (``cpu``, ``memory``, ``nvidia.com/gpu``, ``hugepages-2Mi``...).

    Checked as a qualified name. (The API server additionally requires unprefixed container
    resource names to be standard ones: cpu, memory, ephemeral-storage, hugepages-<size>.)
    """
    return qualified_name(value)


_NATIVE_RESOURCE_DOMAIN: Final = "kubernetes.io/"
_QUOTA_REQUESTS_PREFIX: Final = "requests."
_HUGEPAGES_PREFIX: Final = "hugepages-"


def _is_native_resource(name: str) -> bool:
    # IsNativeResource: unprefixed, or anywhere in the *kubernetes.io/ namespace.
    return "/" not in name or _NATIVE_RESOURCE_DOMAIN in name


def is_extended_resource(name: str) -> bool:
    """IsExtendedResourceName: a resource outside ``*kubernetes.io/`` (GPUs, EFA adapters...).

    Extended resources cannot be overcommitted: a request needs an equal limit.
    """
    if not _is_str(name):
        return False
    if _is_native_resource(name) or name.startswith(_QUOTA_REQUESTS_PREFIX):
        return False
    # It must still be a qualified name once turned into its quota name.
    return not qualified_name(_QUOTA_REQUESTS_PREFIX + name)


def is_hugepages_resource(name: str) -> bool:
    """IsHugePageResourceName: ``hugepages-<size>``."""
    return _is_str(name) and name.startswith(_HUGEPAGES_PREFIX)


def is_overcommit_allowed(name: str) -> bool:
    """IsOvercommitAllowed: only native, non-hugepages resources may have request < limit."""
    return _is_str(name) and _is_native_resource(name) and not is_hugepages_resource(name)
