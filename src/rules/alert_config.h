// What a webhook or email action's configuration must hold, checked when the rules are
// configured (docs/rules.md, "Configuration errors"), and the secrets it names: read from an
// environment variable or a file at configuration time and again at send time, never stored.
#pragma once

#include <string>

#include "trainscope/rules.h"

namespace trainscope::rules {

// The secret's value: the variable's (it must be set and not empty) or the file's contents
// without trailing newlines. `key` names the config field in errors ("url_env"), which never
// hold the value.
Result<std::string> ResolveSecret(const SecretRef& ref, const std::string& key);
// A webhook action's configuration, checked when the rules are configured: its format, its URL
// (given, or its secret resolvable, http(s) with a host), a CA file that is readable PEM, a
// pagerduty routing key, a json secret. Errors name the field ("rule r: webhook 'ca_file': ...").
Status CheckWebhookAction(const std::string& rule, const ActionSpec& action);

// An email action's configuration: smtp:// or smtps:// with a host, a from address and at
// least one recipient, a readable CA file, the password's secret (with a username) resolvable.
Status CheckEmailAction(const std::string& rule, const ActionSpec& action);

// The URL a webhook posts to: the literal one, its secret's, or PagerDuty's Events API.
Result<std::string> WebhookUrl(const ActionSpec& action);

}  // namespace trainscope::rules
