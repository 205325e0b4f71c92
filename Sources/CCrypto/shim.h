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

/* Macros and variadic calls that Swift cannot import, as plain functions. */

/* A new RSA key of `bits` bits (tests and the bench sign with it). */
static inline EVP_PKEY *herald_rsa_generate(unsigned int bits) { return EVP_RSA_gen(bits); }

/* A new EC key on the named curve ("P-256"). */
static inline EVP_PKEY *herald_ec_generate(const char *curve) { return EVP_EC_gen(curve); }

/* The bytes a memory BIO holds. */
static inline long herald_bio_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

#endif
