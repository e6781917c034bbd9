/* GMAC of our own: the AES-256-GCM tag of an empty message with the
 * datagram as associated data, the same tag as libsodium's and OpenSSL's,
 * computed with AES-NI for the two AES blocks and VPCLMULQDQ for GHASH,
 * 32 blocks per reduction.  Only on CPUs that have AES-NI,
 * AVX-512BW and VPCLMULQDQ (lm_gmac_available); auth.c uses the
 * libraries elsewhere. */
#ifndef LM_GMAC_H
#define LM_GMAC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LM_GMAC_KEY_BYTES   32
#define LM_GMAC_NONCE_BYTES 12
#define LM_GMAC_TAG_BYTES   16
#define LM_GMAC_POWERS	    32 /* blocks hashed per reduction */

/* An expanded key: AES-256's round keys and the hash key's powers,
 * kept in the form the multiplication takes them (gmac.c). */
struct lm_gmac_key {
	_Alignas(64) uint8_t round[15][16];
	_Alignas(64) uint8_t power[LM_GMAC_POWERS][16]; /* H^32 first */
};

/* Whether this CPU (and the OS) can run the code below; asked once. */
bool lm_gmac_available(void);

/* Only when lm_gmac_available(). */
void lm_gmac_init(struct lm_gmac_key *k, const uint8_t key[LM_GMAC_KEY_BYTES]);
void lm_gmac_tag(const struct lm_gmac_key *k,
		 const uint8_t nonce[LM_GMAC_NONCE_BYTES], const uint8_t *data,
		 size_t len, uint8_t tag[LM_GMAC_TAG_BYTES]);

/* Wipes the key. */
void lm_gmac_clear(struct lm_gmac_key *k);

#endif
