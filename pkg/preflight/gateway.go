package preflight

import "surge/pkg/config"

// CheckAdminToken fails on an admin token the gateway would refuse off
// loopback (config.WeakAdminToken): a placeholder, the default one or a short one. A
// production gateway is reached from other machines, so the checklist
// does not care which address it listens on.
func CheckAdminToken(token string) Result {
	if err := config.WeakAdminToken(token); err != nil {
		return Result{Item: ItemAdminToken, Status: Fail, Detail: err.Error(),
			Fix: "SURGE_ADMIN_TOKEN=$(openssl rand -hex 32), or mount it and point SURGE_ADMIN_TOKEN_FILE at the file, for the gateway and opsctl alike"}
	}
	return Result{Item: ItemAdminToken, Status: Pass, Detail: "SURGE_ADMIN_TOKEN is set, not the default, and long enough"}
}
