/* cupti_callbacks.c: the callback API's subscription calls and result
 * strings.  One subscriber at a time, as in CUPTI; callbacks are accepted
 * but never invoked (the emulator reports no API callbacks). */
#include <cupti.h>
#include <pthread.h>
#include <stddef.h>

static pthread_mutex_t sub_mu = PTHREAD_MUTEX_INITIALIZER;
static struct subscriber {
    CUpti_CallbackFunc callback;
    void *userdata;
    unsigned domains;      /* bit per CUpti_CallbackDomain enabled */
    int live;
} the_subscriber;

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata)
{
    if (!subscriber) return CUPTI_ERROR_INVALID_PARAMETER;
    CUptiResult rc = CUPTI_SUCCESS;
    pthread_mutex_lock(&sub_mu);
    if (the_subscriber.live) {
        rc = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    } else {
        the_subscriber = (struct subscriber){ callback, userdata, 0, 1 };
        *subscriber = (CUpti_SubscriberHandle)&the_subscriber;
    }
    pthread_mutex_unlock(&sub_mu);
    return rc;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    CUptiResult rc = CUPTI_SUCCESS;
    pthread_mutex_lock(&sub_mu);
    if ((struct subscriber *)subscriber != &the_subscriber || !the_subscriber.live) rc = CUPTI_ERROR_INVALID_PARAMETER;
    else the_subscriber.live = 0;
    pthread_mutex_unlock(&sub_mu);
    return rc;
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain)
{
    if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE || domain >= 32)
        return CUPTI_ERROR_INVALID_PARAMETER;
    CUptiResult rc = CUPTI_SUCCESS;
    pthread_mutex_lock(&sub_mu);
    if ((struct subscriber *)subscriber != &the_subscriber || !the_subscriber.live) rc = CUPTI_ERROR_INVALID_PARAMETER;
    else if (enable) the_subscriber.domains |= 1u << domain;
    else the_subscriber.domains &= ~(1u << domain);
    pthread_mutex_unlock(&sub_mu);
    return rc;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_INVALID_DEVICE: *str = "CUPTI_ERROR_INVALID_DEVICE"; break;
    case CUPTI_ERROR_INVALID_CONTEXT: *str = "CUPTI_ERROR_INVALID_CONTEXT"; break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_INVALID_KIND: *str = "CUPTI_ERROR_INVALID_KIND"; break;
    case CUPTI_ERROR_OUT_OF_MEMORY: *str = "CUPTI_ERROR_OUT_OF_MEMORY"; break;
    case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_UNKNOWN: *str = "CUPTI_ERROR_UNKNOWN"; break;
    default: *str = NULL; return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}
