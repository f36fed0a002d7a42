/* Evaluation (floor 3 of src/run; see trainer.h): the data's sets scored by the forward of
 * the compute they were made for (d->comp). The same scores for any number of ranks. */
#ifndef DZ_RUN_EVALUATE_H
#define DZ_RUN_EVALUATE_H

#include "run/metrics.h"
#include "run/train_data.h"

/* The selection score of a set (NaN for an empty one). */
dz_status dz_evaluate(dz_run_data *d, const dz_class_set *cs, double *score, dz_error *err);
/* Generation: the mean F1 and exact match of the greedy answers (NaN for an empty set). */
dz_status dz_evaluate_qa(dz_run_data *d, const dz_qa_set *s, double *f1, double *em, dz_error *err);
/* The dev and test scores of the current weights (accuracy, minus the LM loss, or F1). */
dz_status dz_evaluate_sets(dz_run_data *d, double *dev, double *test, dz_error *err);
/* An evaluation's scores into a metrics row as the user reads them (LM: the losses). */
void dz_evaluate_row(const dz_run_data *d, double dev, double test, double best_dev, dz_metrics_row *row);

#endif
