#ifndef CCRYPTO_SHIM_H
#define CCRYPTO_SHIM_H
#include <openssl/sha.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

/* Macros and variadic calls that Swift cannot import, as plain functions. */

/* A new RSA key of `bits` bits (tests and the bench sign with it). */
static inline EVP_PKEY *herald_rsa_generate(unsigned int bits) { return EVP_RSA_gen(bits); }

/* A new EC key on the named curve ("P-256"). */
static inline EVP_PKEY *herald_ec_generate(const char *curve) { return EVP_EC_gen(curve); }

/* A P-256 public key from its uncompressed point, its curve copied from `like` (any P-256 key)
   instead of built from the curve's name: building the curve (its Montgomery constants) costs
   three times the import. NULL when the bytes are not a point of the curve (the import checks). */
static inline EVP_PKEY *herald_p256_public_key_like(const EVP_PKEY *like, const unsigned char *point, size_t length) {
    EVP_PKEY *key = EVP_PKEY_new();
    if (key == NULL) return NULL;
    if (EVP_PKEY_copy_parameters(key, like) != 1 || EVP_PKEY_set1_encoded_public_key(key, point, length) != 1) {
        EVP_PKEY_free(key);
        return NULL;
    }
    return key;
}

/* A new key with the parameters (the curve) of `like`: half the cost of EVP_EC_gen, which
   builds the curve from its name each time. */
static inline EVP_PKEY *herald_keygen_like(EVP_PKEY *like) {
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_pkey(NULL, like, NULL);
    if (context == NULL) return NULL;
    EVP_PKEY *key = NULL;
    if (EVP_PKEY_keygen_init(context) <= 0 || EVP_PKEY_keygen(context, &key) <= 0) key = NULL;
    EVP_PKEY_CTX_free(context);
    return key;
}

/* The uncompressed public point of an EC key into `out` (65 bytes for P-256); its length, or 0. */
static inline size_t herald_ec_public_point(const EVP_PKEY *key, unsigned char *out, size_t capacity) {
    size_t length = 0;
    if (EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, out, capacity, &length) != 1) return 0;
    return length;
}

/* The bytes a memory BIO holds. */
static inline long herald_bio_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

#endif
