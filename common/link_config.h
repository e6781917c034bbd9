/* Transport settings of a link from the layout (link_config.c). */
#ifndef LM_LINK_CONFIG_H
#define LM_LINK_CONFIG_H

#include <stdint.h>

#include "auth.h"
#include "config.h"
#include "reliable.h"

/* Transport settings of `level` from the layout for node `self_id`. */
void lm_link_config(const struct lm_layout *layout, enum lm_level level,
			  uint16_t self_id, const lm_auth *auth,
			  struct lm_rel_config *cfg);

/* Transport settings for a control tool (lemuriactl, lemuria-run) at the
 * client level: a silent daemon is given up on quickly (4 retries, a first
 * timeout of 50 ms kept within the layout's rto_min..rto_max, which the
 * transport insists on), acks sent at once. */
void lm_link_tool_config(const struct lm_layout *layout,
			       uint16_t self_id, const lm_auth *auth,
			       struct lm_rel_config *cfg);

#endif
