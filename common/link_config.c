/* Transport settings of a link from the layout (link_config.h), for the
 * daemons, the client library and the control tools alike. */
#include "link_config.h"

void lm_link_config(const struct lm_layout *layout, enum lm_level level,
		    uint16_t self_id, const lm_auth *auth,
		    struct lm_rel_config *cfg)
{
	lm_rel_config_default(cfg, self_id);
	cfg->transport = layout->transport[level];
	cfg->auth = auth;
}

void lm_link_tool_config(const struct lm_layout *layout,
			 uint16_t self_id, const lm_auth *auth,
			 struct lm_rel_config *cfg)
{
	struct lm_transport_cfg *t = &cfg->transport;

	lm_link_config(layout, LM_LEVEL_CLIENT, self_id, auth, cfg);
	t->max_retries = 4;
	t->rto_initial_us = 50000;
	if (t->rto_initial_us < t->rto_min_us)
		t->rto_initial_us = t->rto_min_us;
	if (t->rto_initial_us > t->rto_max_us)
		t->rto_initial_us = t->rto_max_us;
	t->ack_delay_us = 0;
}
